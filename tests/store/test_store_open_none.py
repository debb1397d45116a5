"""`open_store(None)` is a clear error, not a SQLite file named "None" in the working directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.store import StoreError, open_store


def test_no_store_url_is_an_error_and_creates_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for empty in (None, "", "  "):
        with pytest.raises(StoreError, match="no store given"):
            open_store(empty)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
