"""No class reads another class's private attributes (issue 29 §2): outside a class, its
`_names` are its own business. Whoever needs one gets a public method or property instead.

An access `x._name` is the owner's when `x` is `self`, `cls`, or a class defined in the same
module (a module-level table of the class's own methods); `_replace`, `_asdict`, `_fields` and
`_make` are the public API of named tuples, and `_sunder_` names (`_value_`) Enum's. Everything else in engine/ is a read of another's
private, and fails here, but for the ones listed in KNOWN: reads of another instance of the
reader's own class (which this check cannot tell). A new read anywhere fails at once, and so
does an entry of KNOWN that no file needs any more.
"""

from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "engine"
OWN = {"self", "cls"}
NAMED_TUPLE_API = {"_replace", "_asdict", "_fields", "_make"}

# file (relative to engine/) → the `x._name` reads allowed there, and why.
KNOWN: dict[str, set[str]] = {
    "spec/yaml_source.py": {"full._positions"},  # another SourceMap, read by a SourceMap
    "_engine.py": {"engine._settings_changed_elsewhere"},  # Engine.from_project, on the Engine it made
}


def private_reads(path: Path) -> set[str]:
    """`x._name` reads in the file whose `x` is not the class itself (see the module docstring)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    classes = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__") or name.endswith("_") or name in NAMED_TUPLE_API:
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and (owner.id in OWN or owner.id in classes):
            continue
        found.add(f"{ast.unparse(owner)}.{name}")
    return found


def test_no_module_of_engine_reads_another_class_private_attributes() -> None:
    unexpected = {}
    for path in sorted(ENGINE.rglob("*.py")):
        where = path.relative_to(ENGINE).as_posix()
        reads = private_reads(path) - KNOWN.get(where, set())
        if reads:
            unexpected[where] = sorted(reads)
    assert not unexpected, (
        "these read another class's private attributes; give the class a public method or property: "
        + "; ".join(f"{where}: {', '.join(reads)}" for where, reads in unexpected.items()))


def test_every_allowed_read_is_still_made() -> None:
    stale = {where: sorted(allowed - private_reads(ENGINE / where)) for where, allowed in KNOWN.items()}
    assert not any(stale.values()), f"KNOWN allows reads no file makes any more; delete them: {stale}"


def test_the_check_sees_a_private_read(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("class A:\n    def f(self, other):\n        return self._x, other._y, A._z, self.run._w, other._value_\n")
    assert private_reads(planted) == {"other._y", "self.run._w"}
