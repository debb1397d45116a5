"""Skills: the units of work a workflow step runs (prompt, python, template)."""

from .base import Skill
from .prompt import PromptSkill
from .python import PythonSkill
from .template import TemplateSkill

__all__ = ["PromptSkill", "PythonSkill", "Skill", "TemplateSkill"]
