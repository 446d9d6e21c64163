"""One entry per finding, not one per release: findings that say the same thing on several
releases are shown once, with the releases they apply to written as ranges
("sglang 0.5.5–0.5.15, vllm 0.11.0").

Two findings are the same when rule, severity, consequence, module, file, message, error text,
fix and assumptions agree once the place where each names its own release is left out: a text
that names a release is a :class:`ckptlint.findings.Text`, and a name there that is the finding's
release (its ``target``) is a gap in its :class:`Said`. Other names (another release, the one a
requested release was checked with) are text like the rest, and so is a plain string. A group of
several releases says "this release" in the gap, a single one its name.
A range "0.5.9–0.5.15" means every verified release from 0.5.9 to 0.5.15 (``ckptlint targets``):
releases that were not checked, or are not next to each other, are listed one by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Sequence

from ckptlint.findings import Finding, Text, natural_key
from ckptlint.targets import known_versions

if TYPE_CHECKING:
    from ckptlint.targets import Target


@dataclass(frozen=True)
class Said:
    """A finding's text with its own release left out: the literal pieces around each place it
    named that release (one piece when it names none). Equal for the same text on any release."""

    pieces: tuple[str, ...]

    def __bool__(self) -> bool:
        return len(self.pieces) > 1 or bool(self.pieces[0])

    def fill(self, release: str) -> str:
        return release.join(self.pieces)


def said(value: str | None, release: str | None) -> Said | None:
    """``value`` (a finding's text) as a :class:`Said`, with the gaps where it names ``release``."""
    if value is None:
        return None
    if release is None or not isinstance(value, Text):
        return Said((str(value),))
    pieces = [value.parts[0]]
    for name, part in zip(value.names, value.parts[1:]):
        if name == release:
            pieces.append(part)
        else:
            pieces[-1] += name + part
    return Said(tuple(pieces))


@dataclass
class Group:
    finding: Finding  # the first one; its text, its own release left out, is in the fields below
    targets: list[str] = field(default_factory=list)  # requested target ids, in check order; [] = checkpoint-wide
    message: Said = Said(("",))
    hint: Said | None = None
    error_text: Said | None = None
    assumptions: tuple[Said, ...] = ()
    reason: str | None = None  # for left-out findings: why
    brief: Said | None = None  # the finding's own part when its family's explanation is printed apart
    family: Said | None = None  # that explanation

    def text(self, value: Said | None) -> str | None:
        """``value`` with the release put back: its name for one release, "this release" for several."""
        if value is None:
            return None
        return value.fill(self.targets[0] if len(self.targets) == 1 else "this release")


def group_findings(findings: Iterable[Finding], reasons: Sequence[str | None] | None = None) -> list[Group]:
    """Group ``findings`` (in their order; the group takes the place of its first member).
    ``reasons``, parallel to ``findings``, keeps left-out findings with different reasons apart."""
    groups: dict[tuple, Group] = {}
    for i, f in enumerate(findings):
        own = f.target
        msg, hint, err = said(f.message, own), said(f.hint, own), said(f.error_text, own)
        assumptions = tuple(said(a, own) or Said(("",)) for a in f.assumptions)
        reason = reasons[i] if reasons is not None else None
        key = (f.code, f.severity, f.consequence, f.module, f.file, msg, hint, err, assumptions, reason,
               f.target is None)
        g = groups.get(key)
        if g is None:
            g = groups[key] = Group(f, [], msg or Said(("",)), hint, err, assumptions, reason, said(f.brief, own),
                                    said(f.family, own))
        if f.target is not None and f.target not in g.targets:
            g.targets.append(f.target)
    return list(groups.values())


def sort_groups(groups: list[Group], order: Sequence[str]) -> list[Group]:
    """Most severe first; then checkpoint-wide before per-release; then by rule, module, first release."""
    pos = {t: i for i, t in enumerate(order)}

    def key(g: Group) -> tuple:
        f = g.finding
        return (-f.severity.rank, bool(g.targets), f.code, natural_key(f.module or f.file or ""),
                min((pos.get(t, len(pos)) for t in g.targets), default=-1))

    return sorted(groups, key=key)


def release_ranges(ids: Sequence[str], targets: Sequence["Target"]) -> str:
    """``ids`` (a subset of the checked ``targets``) as ranges: "sglang 0.5.5–0.5.15, 0.5.20, vllm 0.33.0".
    A range stands for every verified release from its first to its last: it only joins releases
    that follow each other among the verified ones (and were asked for as such)."""
    chosen = set(ids)
    runs: list[tuple[str, str, str]] = []  # framework, first version, last version
    prev: tuple[str, int] | None = None  # framework and verified position of the previous chosen target
    for t in targets:
        fw, _, version = t.id.partition("==")
        if t.id not in chosen:
            prev = None
            continue
        versions = known_versions(fw)
        pos = versions.index(version) if t.id == t.resolved and version in versions else None
        if prev is not None and pos is not None and prev == (fw, pos - 1):
            runs[-1] = (fw, runs[-1][1], version)
        else:
            runs.append((fw, version, version))
        prev = (fw, pos) if pos is not None else None
    parts: list[str] = []
    last_fw = None
    for fw, a, b in runs:
        span = a if a == b else f"{a}\u2013{b}"
        parts.append(span if fw == last_fw else f"{fw} {span}")
        last_fw = fw
    return ", ".join(parts)


@dataclass
class FamilySplit:
    """Entries of one rule that share their explanation (``Finding.family``), split by release set:
    ``targets`` every release any of them applies to and ``subsets`` (releases, assumptions, entries),
    both in check order; ``one`` when a single release set and assumptions cover them all."""

    targets: list[str]
    subsets: list[tuple[tuple[str, ...], tuple[str, ...], list[Group]]]

    @property
    def one(self) -> bool:
        return len(self.subsets) == 1


def split_family(fam: Sequence[Group], order: Sequence[str]) -> FamilySplit:
    pos = {t: i for i, t in enumerate(order)}

    def ranked(ts) -> list[str]:
        return sorted(ts, key=lambda t: pos.get(t, len(pos)))

    subsets: dict[tuple, list[Group]] = {}
    for g in fam:
        subsets.setdefault((tuple(ranked(g.targets)), g.assumptions), []).append(g)
    rows = sorted(subsets.items(), key=lambda kv: [pos.get(t, len(pos)) for t in kv[0][0]])
    return FamilySplit(ranked({t for g in fam for t in g.targets}),
                       [(targets, assumptions, members) for (targets, assumptions), members in rows])

