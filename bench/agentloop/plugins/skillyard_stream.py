"""skillyard with someone watching the run (an `on_event` callback, as the CLI timeline and an SSE
stream are): the agent loop then streams every model answer."""

from __future__ import annotations

from . import skillyard

load = skillyard.load


def make(base_url: str):
    return skillyard.make(base_url, watched=True)
