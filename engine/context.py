"""Where the contexts of a running call were: they live in engine.runtime.context and are exported by `engine`."""

from . import _moved

__getattr__ = _moved(__name__, dict.fromkeys(("RunContext", "SkillContext"), "engine.runtime.context"))
