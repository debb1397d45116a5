"""engine/__init__.py is the public face: `__all__` is sorted and lists exactly what it exports."""

from __future__ import annotations

import engine


def test_all_is_sorted_and_importable() -> None:
    assert engine.__all__ == sorted(engine.__all__)
    for name in engine.__all__:
        assert hasattr(engine, name), name


def test_nothing_public_is_left_out_of_all() -> None:
    public = {name for name in vars(engine) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(engine, name)).__name__ == "module"}
    assert public - modules == set(engine.__all__)
