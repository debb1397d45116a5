"""What the routers of one service share: the engine, its live runs, keys and limits."""

from __future__ import annotations

from dataclasses import dataclass

from .._engine import Engine
from .auth import ApiKeys
from .hub import RunHub
from .replicas import Replicas


@dataclass(frozen=True)
class Limits:
    """The service's caps (config/engine.yaml `server:`; docs/server.md, "Limits")."""

    max_body_bytes: int = 1 << 20
    max_prompt_chars: int = 200_000
    max_live_runs: int = 1000
    max_live_runs_per_key: int = 100


@dataclass(frozen=True)
class Service:
    engine: Engine
    hub: RunHub
    keys: ApiKeys
    limits: Limits
    replicas: Replicas
