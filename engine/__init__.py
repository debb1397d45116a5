"""skillyard: declare tools, skills and workflows in YAML; route model tool calls through them."""

from ._engine import Engine
from .agent import Agent, AgentLimits, AgentResult
from .context import SkillContext
from .errors import ConfigError, ConfigIssue, Location, SkillyardError, StepFailure, ToolAdminError, UsageError
from .events import Event, EventType
from .link import load_project
from .project import Project
from .providers import ChatMessage, ModelRequest, ModelResponse, Provider, ProviderError, Usage, register_provider
from .result import ToolError, ToolResult
from .store import RunStore, StoreError

__all__ = [
    "Agent",
    "AgentLimits",
    "AgentResult",
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
    "RunStore",
    "SkillContext",
    "SkillyardError",
    "StepFailure",
    "StoreError",
    "ToolAdminError",
    "ToolError",
    "ToolResult",
    "Usage",
    "UsageError",
    "load_project",
    "register_provider",
]
