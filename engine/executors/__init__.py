"""Executors: what actually runs when the router lets a call through."""

from .base import ToolExecutor, ToolType, register_tool_type, tool_type, known_tool_types
from .workflow import LinkedStep, WorkflowExecutor

__all__ = ["LinkedStep", "ToolExecutor", "ToolType", "WorkflowExecutor", "known_tool_types", "register_tool_type", "tool_type"]
