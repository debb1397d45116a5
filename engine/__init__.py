"""skillyard: declare tools, skills and workflows in YAML; route model tool calls through them."""

from ._engine import Engine
from .context import SkillContext
from .errors import ConfigError, ConfigIssue, Location, SkillyardError, StepFailure, UsageError
from .events import Event, EventType
from .link import load_project
from .project import Project
from .providers import ChatMessage, ModelRequest, ModelResponse, Provider, ProviderError, Usage, register_provider
from .result import ToolError, ToolResult

__all__ = [
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
    "SkillContext",
    "SkillyardError",
    "StepFailure",
    "ToolError",
    "ToolResult",
    "Usage",
    "UsageError",
    "load_project",
    "register_provider",
]
