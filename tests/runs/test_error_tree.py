"""One error tree: every exception class engine/ defines derives from SkillyardError (private
control-flow ones, named with a leading underscore, may stay outside), and errors.py draws each."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import engine
from engine import errors
from engine.errors import SkillyardError


def _defined_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined in a module of engine/ (all of them imported)."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(engine.__path__, "engine."):
        if info.name.endswith(".__main__"):  # runs a command when imported
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__:
                found[f"{module.__name__}.{name}"] = value
    return found


def test_every_public_exception_derives_from_skillyard_error() -> None:
    outside = sorted(where for where, cls in _defined_exceptions().items()
                     if not cls.__name__.startswith("_") and not issubclass(cls, SkillyardError))
    assert outside == []


def test_errors_py_draws_every_public_exception() -> None:
    tree = errors.__doc__ or ""
    missing = sorted({cls.__name__ for cls in _defined_exceptions().values() if not cls.__name__.startswith("_")}
                     - set(tree.replace(",", " ").split()))
    assert missing == []


def test_the_moved_classes_keep_their_old_names_and_kinds() -> None:
    """Defined once in errors.py, still importable where they were raised, and still ValueErrors
    where they were (pydantic validators and callers catch them as such)."""
    from engine.lang.conditions import ConditionSyntaxError
    from engine.lang.mapping import MappingError, MappingSyntaxError
    from engine.link.expect import JudgeError
    from engine.providers.base import ProviderError
    from engine.spec.yaml_source import YamlLoadError

    assert ProviderError is engine.ProviderError is errors.ProviderError
    assert (MappingError, MappingSyntaxError, ConditionSyntaxError, YamlLoadError, JudgeError) == (
        errors.MappingError, errors.MappingSyntaxError, errors.ConditionSyntaxError, errors.YamlLoadError, errors.JudgeError)
    assert issubclass(MappingSyntaxError, ValueError) and issubclass(ConditionSyntaxError, ValueError)
    assert ProviderError("x", retryable=True).retryable
