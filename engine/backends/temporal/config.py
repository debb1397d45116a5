"""The Temporal backend's settings as a run uses them, and what the backend requires."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import UsageError

if TYPE_CHECKING:
    from ...runtime.project import Project
    from ...store import Store
    from ...store.shared import SharedStore

ENV_ADDRESS = "SKILLYARD_TEMPORAL_ADDRESS"


@dataclass(frozen=True)
class TemporalConfig:
    address: str
    namespace: str
    task_queue: str
    heartbeat_timeout: float

    @classmethod
    def of(cls, project: "Project") -> "TemporalConfig":
        """`execution.temporal` of config/engine.yaml; SKILLYARD_TEMPORAL_ADDRESS wins over its address."""
        settings = project.settings.execution.temporal
        return cls(os.environ.get(ENV_ADDRESS) or settings.address, settings.namespace, settings.task_queue,
                   settings.heartbeat_timeout)


def require_sdk() -> None:
    """UsageError naming the fix when the `temporal` extra is not installed."""
    try:
        import temporalio  # noqa: F401
    except ImportError:
        raise UsageError("the temporal backend needs the Temporal SDK: pip install 'skillyard[temporal]' "
                         "(or choose execution.backend: local / --backend local)") from None


def require_shared_store(store: "Store | None") -> "SharedStore":
    """The store events are written to and followed from: PostgreSQL, shared by front doors and workers."""
    from ...store.postgres import PostgresStore

    if isinstance(store, PostgresStore):
        return store
    where = "no run store (--no-store, or store.enabled: false)" if store is None else f"the run store {store.where}"
    raise UsageError(
        f"the temporal backend needs a postgresql:// run store shared by the workers, and this command has {where}: "
        "set SKILLYARD_STORE_URL (or store.url in config/engine.yaml) to postgresql://user@host:port/db, "
        "or run with --backend local"
    )


async def connect(config: TemporalConfig) -> Any:
    """A Temporal client; UsageError naming the address when the server cannot be reached."""
    from temporalio.client import Client

    try:
        return await Client.connect(config.address, namespace=config.namespace)
    except Exception as exc:  # noqa: BLE001 - the SDK raises RuntimeError for a refused connection
        raise UsageError(
            f"cannot reach the Temporal server at {config.address} (namespace {config.namespace}): {exc} — start one "
            f"(`temporal server start-dev`), or set {ENV_ADDRESS} / execution.temporal.address"
        ) from None
