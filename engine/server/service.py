"""What the routers of one service share: the engine, its live runs, keys and limits."""

from __future__ import annotations

from dataclasses import dataclass

from .._engine import Engine
from .auth import ApiKeys
from .hub import RunHub
from .replicas import Replicas


@dataclass(frozen=True)
class Limits:
    """The service's caps, as config/engine.yaml `server:` sets them (their defaults are
    ServerSettings', engine/spec/settings.py; docs/server.md, "Limits")."""

    max_body_bytes: int
    max_prompt_chars: int
    max_live_runs: int
    max_live_runs_per_key: int


@dataclass(frozen=True)
class Service:
    engine: Engine
    hub: RunHub
    keys: ApiKeys
    limits: Limits
    replicas: Replicas
