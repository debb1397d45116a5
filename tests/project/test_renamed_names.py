"""Names that moved keep working for a release, with a DeprecationWarning that says the new one."""

from __future__ import annotations

import pytest

from engine.runs.run import Run
from engine.runtime.context import CallContext, SkillContext


def test_the_call_context_was_called_run_context() -> None:
    with pytest.warns(DeprecationWarning, match="CallContext"):
        from engine.context import RunContext
    assert RunContext is CallContext
    with pytest.warns(DeprecationWarning, match="CallContext"):
        from engine.runtime.context import RunContext as Old
    assert Old is CallContext


def test_the_calls_run_was_called_events_and_a_skills_call_run() -> None:
    run = Run("run_1", [], kind="tool", name="t")
    call = CallContext("run_1", "call_1", "t", run, project=None)  # type: ignore[arg-type]
    skill = SkillContext(call, "step", "skill")
    assert call.run is run and skill.call is call
    with pytest.warns(DeprecationWarning, match="CallContext.run"):
        assert call.events is run
    with pytest.warns(DeprecationWarning, match="SkillContext.call"):
        assert skill.run is call


def test_the_run_and_its_events_moved_to_engine_runs() -> None:
    import engine.runs.events
    import engine.runs.run
    import engine.runtime.events
    import engine.runtime.run

    assert engine.runtime.run is engine.runs.run and engine.runtime.events is engine.runs.events
