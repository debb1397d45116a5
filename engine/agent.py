"""Where the agent loop's names were: they live in engine.runtime.agent and are exported by `engine`."""

from . import _moved

__getattr__ = _moved(__name__, dict.fromkeys(("Agent", "AgentLimits", "AgentResult"), "engine.runtime.agent"))
