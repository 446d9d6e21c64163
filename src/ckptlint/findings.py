"""Findings: what a check reports, and how severity follows from consequence."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Iterable


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"info": 0, "warning": 1, "error": 2}[self.value]


class Consequence(str, Enum):
    """What the framework will do with the checkpoint (docs/decisions.md#consequence-and-severity)."""

    LOAD_ERROR = "load-error"
    SILENT_CORRUPTION = "silent-corruption"
    DEGRADED = "degraded"
    HYGIENE = "hygiene"

    @property
    def default_severity(self) -> Severity:
        return _DEFAULT_SEVERITY[self]


_DEFAULT_SEVERITY = {
    Consequence.LOAD_ERROR: Severity.ERROR,
    Consequence.SILENT_CORRUPTION: Severity.ERROR,
    Consequence.DEGRADED: Severity.WARNING,
    Consequence.HYGIENE: Severity.INFO,
}

MAX_TENSORS_LISTED = 50
# Characters kept of any one string in a finding (a message, a tensor or module name, a value in
# its data). Real ones are a few hundred at most; a checkpoint can hold a name of megabytes, which
# a finding repeats (message, module, tensors, data) for every target.
MAX_TEXT = 2000


class Text(str):
    """A finding's text that names framework releases, kept as literal ``parts`` with the release
    ``names`` between them (``len(parts) == len(names) + 1``). It is the string it reads as
    (``str(t)``, JSON, comparisons); the parts let the text report show one finding for several
    releases (:mod:`ckptlint.render.grouping`): the place where a finding names its own release
    becomes "this release" there, and nothing else of the text is touched.

    Built from :func:`mention` and ``+`` with plain strings (either side) and other texts; a name
    written into an f-string or taken through a ``str`` method is plain text from then on.
    """

    parts: tuple[str, ...]
    names: tuple[str, ...]

    def __new__(cls, parts: Iterable[str], names: Iterable[str] = ()) -> "Text":
        parts, names = tuple(parts), tuple(names)
        if len(parts) != len(names) + 1:
            raise ValueError("a Text has one more literal part than release names")
        if not names:
            return parts[0]  # type: ignore[return-value]  # (nothing named: the plain string)
        self = super().__new__(cls, "".join(p + n for p, n in zip(parts, names)) + parts[-1])
        object.__setattr__(self, "parts", parts)
        object.__setattr__(self, "names", names)
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Text is immutable")

    def __reduce__(self) -> tuple:
        return (Text, (self.parts, self.names))

    def __add__(self, other: str) -> "Text":  # type: ignore[override]
        if not isinstance(other, str):
            return NotImplemented
        return _concat(self, other)

    def __radd__(self, other: str) -> "Text":
        if not isinstance(other, str):
            return NotImplemented
        return _concat(other, self)

    def clipped(self, limit: int = MAX_TEXT) -> "Text | str":
        """:func:`clip` of the text, keeping as names those that stand whole before the cut (a name
        the cut reaches, or ends at, is plain text: the "..." that follows is part of no name)."""
        if len(self) <= limit:
            return self
        keep = limit - 32
        parts, names, room = [""], [], keep
        for part, name in zip(self.parts, (*self.names, "")):
            if len(part) >= room:
                parts[-1] += part[:room]
                break
            parts[-1] += part
            room -= len(part)
            if len(name) >= room:
                parts[-1] += name[:room]
                break
            names.append(name)
            parts.append("")
            room -= len(name)
        parts[-1] += f"...[{len(self) - keep:,} more characters]"
        return Text(parts, names)


def mention(release: str) -> Text:
    """The name of a release (``sglang==0.5.15``) as a finding's text writes it: a :class:`Text`,
    to be joined to the rest of the text with ``+``."""
    return Text(("", ""), (release,))


def _concat(a: str, b: str) -> Text:
    ap, an = (a.parts, a.names) if isinstance(a, Text) else ((str(a),), ())
    bp, bn = (b.parts, b.names) if isinstance(b, Text) else ((str(b),), ())
    return Text((*ap[:-1], ap[-1] + bp[0], *bp[1:]), (*an, *bn))


@dataclass
class Finding:
    """One reported problem.

    ``code``/``name`` identify the rule; ``consequence`` is per finding (the same rule can
    predict a load error on one target and a silent failure on another); ``severity``
    defaults from the consequence. A text field that names a release is a :class:`Text`
    (built with :func:`mention`), which is how the text report finds the finding's own release.
    """

    code: str
    consequence: Consequence
    message: str
    name: str = ""
    severity: Severity | None = None
    target: str | None = None
    module: str | None = None
    tensors: list[str] = field(default_factory=list)
    file: str | None = None
    hint: str | None = None
    error_text: str | None = None
    assumptions: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    # The part of ``hint`` (its end, written " (NOTE)") that applies alike to many findings: the text
    # report prints it once, as a note; every other format keeps ``hint`` whole.
    hint_note: str | None = None
    # Text-report forms for a finding that shares its explanation with others of its rule: ``family``
    # is the shared explanation and ``family_hint`` the shared fix (printed once, above the members),
    # ``brief`` what is this finding's own (its module, stored and allocated forms, entries). Set
    # together or not at all; every other format keeps ``message`` and ``hint`` whole.
    family: str | None = None
    family_hint: str | None = None
    brief: str | None = None

    def __post_init__(self) -> None:
        if self.severity is None:
            self.severity = self.consequence.default_severity
        if len(self.tensors) > MAX_TENSORS_LISTED:
            self.data.setdefault("tensor_count", len(self.tensors))
            self.tensors = self.tensors[:MAX_TENSORS_LISTED]
        if any(len(t) > MAX_TEXT for t in self.tensors):
            self.tensors = [clip(t) for t in self.tensors]
        for attr in ("message", "module", "file", "hint", "error_text"):
            v = getattr(self, attr)
            if v is not None and len(v) > MAX_TEXT:
                setattr(self, attr, clip(v))
        self.data = _clip_data(self.data)

    def sort_key(self) -> tuple:
        return (
            self.target or "",
            self.file or "",
            natural_key(self.module or (self.tensors[0] if self.tensors else "")),
            self.code,
            self.message,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "name": self.name,
            "severity": self.severity.value if self.severity else None,
            "consequence": self.consequence.value,
            "target": self.target,
            "module": self.module,
            "tensors": list(self.tensors),
            "file": self.file,
            "message": self.message,
            "hint": self.hint,
        }
        if self.error_text:
            out["error_text"] = self.error_text
        if self.assumptions:
            out["assumptions"] = list(self.assumptions)
        if self.data:
            out["data"] = self.data
        return out


def clip(text: str, limit: int = MAX_TEXT) -> str:
    """``text``, or its first characters and how many more there were when it is over ``limit``."""
    if len(text) <= limit:
        return text
    if isinstance(text, Text):
        return text.clipped(limit)
    keep = limit - 32
    return f"{text[:keep]}...[{len(text) - keep:,} more characters]"


def _clip_data(x: Any) -> Any:
    """``x`` with every string (keys too) clipped; ``x`` itself when nothing needed it."""
    if isinstance(x, str):
        return clip(x) if len(x) > MAX_TEXT else x
    if isinstance(x, dict):
        items = [(_clip_data(k), _clip_data(v)) for k, v in x.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, x.items())):
            return x
        return dict(items)
    if isinstance(x, (list, tuple)):
        out = [_clip_data(v) for v in x]
        if all(a is b for a, b in zip(out, x)):
            return x
        return type(x)(out)
    return x


def natural_key(text: str) -> tuple:
    """Sort ``layers.2`` before ``layers.10``."""
    parts: list[Any] = []
    for chunk in text.split("."):
        parts.append((0, int(chunk), "") if chunk.isdecimal() else (1, 0, chunk))
    return tuple(parts)
