"""What the `mock` model reads out of a prompt: a title, labelled lists, whole phrases.

The mock cannot reason, but it can put the prompt's own phrases where a schema's property
names say they belong: `mustHave` ("Required skills") takes the items under
"Requirements:", `title` the first short line, a list of days one topic each. So its
answers read like a rough draft of the real thing instead of a word salad.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_TOKEN = re.compile(r"[a-z]+")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_LABELLED = re.compile(r"^\s*([A-Za-z][A-Za-z /&-]{1,40}):\s*(.*)$")
_QUOTED = re.compile(r"[\"“]([^\"”\n]{3,120})[\"”]")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
# "Strong knowledge of PostgreSQL" → "PostgreSQL": the skill, not the recruiter's wording
_FILLER = re.compile(
    r"^(?:\d+\+?\s+years?\s+of\s+|(?:strong|solid|good|deep|proven|hands-on)\s+)?"
    r"(?:(?:knowledge|experience|understanding|familiarity|proficiency|expertise)\s+(?:of|with|in)\s+)?",
    re.I,
)
_QUIET = frozenset("a an and the of to for in on with or by as at is are be your our this that".split())

# Property names (and descriptions) by the role they play in an answer
ROLES: dict[str, frozenset[str]] = {
    "title": frozenset({"title", "role", "name", "headi", "posit"}),
    "summary": frozenset({"summa", "overv", "descr", "abstr", "intro"}),
    "focus": frozenset({"focus", "topic", "theme", "skill", "subje", "area"}),
    "deliverable": frozenset({"deliv", "outco", "outpu", "resul", "goal", "artif"}),
    "tasks": frozenset({"tasks", "task", "steps", "step", "actio", "todo", "exerc", "activ"}),
}


def stems(text: str) -> set[str]:
    """Words of a name or label, lower case, cut to five letters (`requirements` ~ `required`)."""
    words = _TOKEN.findall(_CAMEL.sub(" ", text).lower())
    return {w[:5] for w in words if w not in _QUIET}


def role_of(name: str, description: str = "") -> str | None:
    words = stems(name) or stems(description)
    for role, keys in ROLES.items():
        if words & keys:
            return role
    return None


@dataclass
class Section:
    label: set[str]
    items: list[str] = field(default_factory=list)
    handed_out: int = 0  # how often an answer used it (a list nobody names takes the least used)


@dataclass
class Material:
    title: str
    sections: list[Section]
    phrases: list[str]  # every bullet and sentence, in order

    @functools.cached_property
    def topics(self) -> list[str]:
        """Short items to build a plan on: the listed skills first, then any phrase (each once,
        as first written). Read once: a schema's every list asks for them."""
        first: dict[str, str] = {}
        for section in self.sections:
            for item in section.items:
                if len(item) <= 80:
                    first.setdefault(item.lower(), item)
        items = list(first.values())
        return items or [p for p in self.phrases if len(p) <= 80] or [self.title]

    def section_for(self, name: str, description: str = "", *, any_section: bool = False) -> Section | None:
        """The labelled list whose label shares most words with the property's name and
        description; with `any_section`, else the least used one (the last of those)."""
        wanted = stems(name) | stems(description)
        best = max(self.sections, key=lambda s: len(s.label & wanted), default=None)
        if best is None or not best.label & wanted:
            if not any_section or not self.sections:
                return None
            best = min(reversed(self.sections), key=lambda s: s.handed_out)
        best.handed_out += 1
        return best


def read(prompt: str) -> Material:
    sections: list[Section] = []
    phrases: list[str] = []
    title = ""
    first_label = ""  # "Android developer: Kotlin, Gradle" names the role when no line does
    current: Section | None = None
    for raw in prompt.splitlines():
        line = raw.strip()
        if not line:
            continue
        bullet = _BULLET.match(line)
        labelled = None if bullet else _LABELLED.match(line)
        if bullet:
            item = _skill(line[bullet.end():])
            phrases.append(item)
            if current is not None:
                current.items.append(item)
        elif labelled and not labelled.group(2):  # "Requirements:" opens a list
            current = Section(stems(labelled.group(1)))
            sections.append(current)
        elif labelled:  # "Must-have skills: Go, Rust"
            first_label = first_label or labelled.group(1).strip()
            items = [_skill(part) for part in labelled.group(2).split(",") if part.strip()]
            sections.append(Section(stems(labelled.group(1)), items))
            current = None
        else:
            sentences = [s.strip() for s in _SENTENCE.split(line) if s.strip()]
            phrases.extend(s.rstrip(".") for s in sentences)
            if not title and len(line) <= 90 and not line.endswith((".", "?", "!")):
                title = line
    quoted = _QUOTED.search(prompt)
    title = title or (quoted.group(1) if quoted else "") or first_label or (phrases[0] if phrases else "the input")
    return Material(title, [s for s in sections if s.items], phrases or [title])


def _skill(text: str) -> str:
    text = text.strip().rstrip(".;")
    return _FILLER.sub("", text, count=1) or text


def capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]
