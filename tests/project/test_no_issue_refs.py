"""Code, docstrings and docs say why, not where a change came from: no issue numbers ("issue
29", "#33"), no names of the files a project was seeded from ("seed 000", shared/seeds/…).
A reader has neither at hand; the reason is what they need."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REFERENCE = re.compile(r"\bissues? #?\d+|\(#\d+\)|(?<![\w&])#\d{2,}\b|\bseeds? \d{3}\b|\bshared/seeds\b|\bstop \d+\b",
                       re.IGNORECASE)


def _files() -> list[Path]:
    code = [path for path in (REPO / "engine").rglob("*.py")]
    return sorted([*code, REPO / "README.md", *(REPO / "docs").glob("*.md")])


def references() -> list[str]:
    found = []
    for path in _files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in REFERENCE.finditer(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {match.group(0)!r} in {line.strip()[:100]}")
    return found


@pytest.mark.parametrize("text", ["(issue 29)", "Issue 13 measured it", "issues 10 and 11", "see #33", "(#4)",
                                  "seed 000's admin table", "shared/seeds/003.md", "stop 35"])
def test_a_reference_is_found(text: str) -> None:
    assert REFERENCE.search(text)


@pytest.mark.parametrize("text", ["a seed of the mock model", "color #fff", "&#39;", "an issue with the key",
                                  "stop the run", "session 2"])
def test_what_is_not_a_reference_is_not_found(text: str) -> None:
    assert not REFERENCE.search(text)


def test_no_issue_numbers_or_seed_names_in_code_or_docs() -> None:
    assert references() == []
