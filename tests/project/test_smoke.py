"""The README's main job, through the Python API."""

from pathlib import Path

from engine import Engine

ROOT = Path(__file__).resolve().parents[2]


def test_default_project_plans_seven_days() -> None:
    engine = Engine.from_dir(ROOT)
    result = engine.call_tool_sync("analyzeJobAndGeneratePlan", {"jdText": (ROOT / "examples/jd.txt").read_text()})
    assert result.ok, result.error
    assert [day["day"] for day in result.data["days"]] == [1, 2, 3, 4, 5, 6, 7]
    skill = engine.project.skills["generateSevenDayPlan"]
    assert skill.output_schema is not None and skill.output_schema.check(result.data) == []
