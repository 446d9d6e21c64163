"""One entry per finding, not one per release: findings that say the same thing on several
releases are shown once, with the releases they apply to written as ranges
("sglang 0.5.5–0.5.15, vllm 0.11.0").

Two findings are the same when rule, severity, consequence, module, file, message, error text,
fix and assumptions agree once the release's own name (``sglang==0.5.15``) is taken out of
them; a group of several releases says "this release" where a single one would name itself.
A range "0.5.9–0.5.15" means every verified release from 0.5.9 to 0.5.15 (``ckptlint targets``):
releases that were not checked, or are not next to each other, are listed one by one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Sequence

from ckptlint.findings import Finding, natural_key

if TYPE_CHECKING:
    from ckptlint.targets import Target

_HOLE = "\x00release\x00"


@dataclass
class Group:
    finding: Finding  # the first one; its target-specific text is in the fields below
    targets: list[str] = field(default_factory=list)  # requested target ids, in check order; [] = checkpoint-wide
    message: str = ""
    hint: str | None = None
    error_text: str | None = None
    assumptions: tuple[str, ...] = ()
    reason: str | None = None  # for left-out findings: why
    brief: str | None = None  # the finding's own part when its family's explanation is printed apart
    family: str | None = None  # that explanation, the release taken out like the message's

    def text(self, value: str | None) -> str | None:
        """``value`` with the release put back: its name for one release, "this release" for several."""
        if value is None or _HOLE not in value:
            return value
        return value.replace(_HOLE, self.targets[0] if len(self.targets) == 1 else "this release")


def _pattern(target_id: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.=])" + re.escape(target_id) + r"(?![\w.])")


def _norm(pat: re.Pattern[str] | None, value: str | None) -> str | None:
    if value is None or pat is None:
        return value
    return pat.sub(_HOLE, value)


def group_findings(findings: Iterable[Finding], reasons: Sequence[str | None] | None = None) -> list[Group]:
    """Group ``findings`` (in their order; the group takes the place of its first member).
    ``reasons``, parallel to ``findings``, keeps left-out findings with different reasons apart."""
    groups: dict[tuple, Group] = {}
    pats: dict[str, re.Pattern[str]] = {}
    for i, f in enumerate(findings):
        pat = None
        if f.target is not None:
            pat = pats.get(f.target) or pats.setdefault(f.target, _pattern(f.target))
        msg, hint, err = _norm(pat, f.message), _norm(pat, f.hint), _norm(pat, f.error_text)
        assumptions = tuple(_norm(pat, a) or "" for a in f.assumptions)
        reason = reasons[i] if reasons is not None else None
        key = (f.code, f.severity, f.consequence, f.module, f.file, msg, hint, err, assumptions, reason,
               f.target is None)
        g = groups.get(key)
        if g is None:
            g = groups[key] = Group(f, [], msg or "", hint, err, assumptions, reason, _norm(pat, f.brief),
                                    _norm(pat, f.family))
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
    from ckptlint.targets import known_versions

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

