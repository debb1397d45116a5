"""skillyard: declare tools, skills and workflows in YAML; route model tool calls through them."""

from ._engine import Engine
from .agent import Agent, AgentLimits, AgentResult
from .context import SkillContext
from .errors import (
    AgentSetupError, ConfigError, ConfigIssue, Location, SkillyardError, StepFailure, ToolAdminError, UsageError,
)
from .events import Event, EventType
from .link import load_project
from .project import Project
from .providers import ChatMessage, ModelRequest, ModelResponse, Provider, ProviderError, Usage, register_provider
from .result import ToolError, ToolResult
from .run import Run
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
