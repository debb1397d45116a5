"""skillyard: declare tools, skills and workflows in YAML; route model tool calls through them."""

from ._engine import Engine
from .errors import (
    AgentSetupError, ConfigError, ConfigIssue, Location, SkillyardError, StepFailure, ToolAdminError, UsageError,
)
from .link.linker import load_project
from .providers import ChatMessage, ModelRequest, ModelResponse, Provider, ProviderError, Usage, register_provider
from .runtime.agent import Agent, AgentLimits, AgentResult
from .runtime.context import SkillContext
from .runtime.events import Event, EventType
from .runtime.project import Project
from .runtime.result import ToolError, ToolResult
from .runtime.run import Run
from .store import RunStore, Store, StoreError, open_store

__all__ = [
    "Agent",
    "AgentLimits",
    "AgentResult",
    "AgentSetupError",
    "ChatMessage",
    "ConfigError",
    "ConfigIssue",
    "Engine",
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
    "ToolAdminError",
    "ToolError",
    "ToolResult",
    "Usage",
    "UsageError",
    "load_project",
    "open_store",
    "register_provider",
]
