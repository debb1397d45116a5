"""skillyard: declare tools, skills and workflows in YAML; route model tool calls through them.

Everything public is importable from here. The error tree is loaded with the package; every
other name loads its module when first read, so `import engine` (and the command line's
`--help`) does not pay for the linker, the store or a provider SDK that a process never uses.
"""

import typing as _typing
import warnings as _warnings
from importlib import import_module as _import_module

from .errors import (
    AgentSetupError,
    ConfigError,
    ConfigIssue,
    ErrorCode,
    Location,
    SkillyardError,
    StepFailure,
    ToolAdminError,
    UsageError,
)

if _typing.TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers and editors
    from ._engine import Engine
    from .link.linker import load_project
    from .logging import configure_logging
    from .providers.base import ChatMessage, ModelRequest, ModelResponse, Provider, ProviderError, Usage
    from .providers.registry import register_provider
    from .runs.events import Event, EventType
    from .runs.run import Run
    from .runtime.agent import Agent, AgentLimits, AgentResult
    from .runtime.context import CallContext, SkillContext
    from .runtime.contracts import ToolExecutor, ToolType, register_tool_type
    from .runtime.project import Project
    from .runtime.result import ToolError, ToolResult
    from .store import RunStore, Store, StoreError, open_store
    from .tool_admin import ToolAdmin

_LAZY = {  # public name → the module that defines it
    "Agent": ".runtime.agent",
    "AgentLimits": ".runtime.agent",
    "AgentResult": ".runtime.agent",
    "ChatMessage": ".providers.base",
    "Engine": "._engine",
    "CallContext": ".runtime.context",
    "Event": ".runs.events",
    "EventType": ".runs.events",
    "ModelRequest": ".providers.base",
    "ModelResponse": ".providers.base",
    "Project": ".runtime.project",
    "Provider": ".providers.base",
    "ProviderError": ".providers.base",
    "Run": ".runs.run",
    "RunStore": ".store",
    "SkillContext": ".runtime.context",
    "Store": ".store",
    "StoreError": ".store",
    "ToolAdmin": ".tool_admin",
    "ToolError": ".runtime.result",
    "ToolExecutor": ".runtime.contracts",
    "ToolResult": ".runtime.result",
    "ToolType": ".runtime.contracts",
    "Usage": ".providers.base",
    "configure_logging": ".logging",
    "load_project": ".link.linker",
    "open_store": ".store",
    "register_provider": ".providers.registry",
    "register_tool_type": ".runtime.contracts",
}

__all__ = [
    "Agent",
    "AgentLimits",
    "AgentResult",
    "AgentSetupError",
    "CallContext",
    "ChatMessage",
    "ConfigError",
    "ConfigIssue",
    "Engine",
    "ErrorCode",
    "Event",
    "EventType",
    "Location",
    "ModelRequest",
    "ModelResponse",
    "Project",
    "Provider",
    "ProviderError",
    "Run",
    "RunStore",
    "SkillContext",
    "SkillyardError",
    "StepFailure",
    "Store",
    "StoreError",
    "ToolAdmin",
    "ToolAdminError",
    "ToolError",
    "ToolExecutor",
    "ToolResult",
    "ToolType",
    "Usage",
    "UsageError",
    "configure_logging",
    "load_project",
    "open_store",
    "register_provider",
    "register_tool_type",
]


def __getattr__(name: str) -> object:
    """A public name's module is imported when the name is first read; then it is a plain attribute.
    A subpackage (`engine.store`) is imported as `import engine.store` would."""
    module = _LAZY.get(name)
    if module is None:
        try:
            return _import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(_import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def _moved(module: str, names: dict[str, str]) -> _typing.Callable[[str], object]:
    """The `__getattr__` of a module whose names moved: each still imports for one release, with
    a DeprecationWarning at the line that imports it saying where it is now (`names`: name → module)."""

    def moved_name(name: str) -> object:
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        where = f"from engine import {name}" if name in _LAZY else f"from {names[name]} import {name}"
        _warnings.warn(f"{module}.{name} moved: write `{where}` ({module} goes away in the next release)",
                      DeprecationWarning, stacklevel=2)
        return getattr(_import_module(names[name]), name)

    return moved_name
