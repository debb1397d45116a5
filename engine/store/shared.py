"""`SharedStore`: what a backend that runs calls in other processes needs from the run store.

A call executed by workers elsewhere (the Temporal backend) is recorded by those workers and
followed by the front door that started it, so both sides must reach one store, and the store
must know which runs execute elsewhere: the heartbeat sweep then leaves a run whose front
door died to a worker, which adopts it and ends it as its execution ends (instead of marking
it `interrupted`). Only a store shared by processes on several hosts can do that:
`PostgresStore` implements this protocol, the SQLite `RunStore` does not. Typing a backend's
store as `SharedStore` keeps those methods from being called on a store that lacks them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

if TYPE_CHECKING:
    from ..runtime.events import Event
    from .queries import RunRecord


class SharedStore(Protocol):
    """The run store as a remote-execution backend, its workers and its orphan adopter use it."""

    where: str
    """The store as users name it in messages (a URL without its password)."""
    listener: Callable[["Event"], None]
    """Takes events one by one (a worker's, an adopter's), redacted already."""

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until everything queued so far is committed; StoreError if writing failed."""
        ...

    def run(self, run_id: str, *, principal: str | None = None) -> RunRecord | None:
        """One run by id or unambiguous prefix."""
        ...

    def events(self, run_id: str, *, after_seq: int = 0) -> list[dict[str, Any]]:
        """A run's events after `after_seq`, in `seq` order: how a front door follows a run."""
        ...

    def receives(self, listener: Callable[["Event"], None]) -> bool:
        """Whether `listener` delivers to this store (an event followed from it is not written back)."""
        ...

    def listen(self, channel: str, callback: Callable[[str], None]) -> Callable[[], None]:
        """Hear the notices of `channel` from every process sharing the store; returns the stop."""
        ...

    def record_executor(self, run_id: str, executor: str) -> None:
        """`run_id` executes on `executor`'s workers: if the process that wrote its row dies, the
        run is adopted, not interrupted."""
        ...

    def executor(self, run_id: str) -> str | None:
        """Where `run_id` executes when not in the process that wrote its row, else None."""
        ...

    def adopt_orphans(self, executor: str, limit: int = 20) -> list[tuple[str, str, int]]:
        """Take over `executor`'s runs whose process stopped: [(run_id, kind, started_at)]."""
        ...

    def interrupt(self, run_id: str, message: str) -> bool:
        """End a running run as `interrupted` (an adopted run whose execution is gone)."""
        ...
