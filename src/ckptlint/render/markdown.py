"""Markdown report (``--format markdown``), for a GitHub job summary (``$GITHUB_STEP_SUMMARY``) or a
pull-request comment: the verdict matrix first, then one entry per finding with its release
ranges (:mod:`ckptlint.render.grouping`), then what configuration or a baseline left out.

Text from the checkpoint is made printable (:func:`ckptlint.render.safe.clean`) and cannot add
Markdown of its own: outside the message's own code spans every character Markdown or HTML would
act on is backslash-escaped, and code spans are only the message's own (an odd backtick count
makes the whole text plain), so a tensor name cannot inject a link, an image or HTML.
"""

from __future__ import annotations

import re

from ckptlint.engine import Report
from ckptlint.render.grouping import Group, group_findings, release_ranges, sort_groups, split_family
from ckptlint.render.safe import clean
from ckptlint.render.text import Notes, _family_key, _with_note, families
from ckptlint.verdict import CONSEQUENCES, verdicts

_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~&])")  # links need [ ], images ![ ], HTML < >, entities &
ICON = {"loads": "✅", "degraded": "⚠️", "wrong-outputs": "❌", "will-not-load": "❌", "not-supported": "➖",
        "no-verdict": "❔"}


def escape(text: str) -> str:
    """Plain text, safe in a Markdown paragraph or table cell (a leading - or + would start a list)."""
    out = _SPECIAL.sub(r"\\\1", clean(text))
    return "\\" + out if out[:1] in ("-", "+") else out


def inline(text: str) -> str:
    """A message that marks names with backticks: those spans stay code, the rest is escaped."""
    text = clean(text)
    parts = text.split("`")
    if len(parts) % 2 == 0:  # unbalanced: nothing is code
        return escape(text)
    return "".join(escape(p) if i % 2 == 0 else _code(p) for i, p in enumerate(parts))


def _code(text: str) -> str:
    """A code span holding ``text`` as is (fenced with more backticks than any run inside it)."""
    if not text.strip():
        return escape(text)
    runs = [len(m) for m in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if runs else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def matrix(report: Report) -> list[str]:
    if not report.targets:
        return []
    lines = ["| release | " + " | ".join(CONSEQUENCES) + " | verdict |",
             "|---|" + "---:|" * len(CONSEQUENCES) + "---|"]
    for v in verdicts(report):
        cells = " | ".join(str(v.counts[c]) for c in CONSEQUENCES)
        lines.append(f"| `{v.target}` | {cells} | {ICON[v.status]} {escape(v.label)} |")
    return lines


def entry(g: Group, report: Report, notes=None) -> list[str]:
    """One finding on the releases of its group; with ``notes`` (:class:`ckptlint.render.text.Notes`)
    its assumptions and the shared part of its fix are references to notes printed once."""
    f = g.finding
    where = release_ranges(g.targets, report.targets) if g.targets else "checkpoint"
    message = g.text(g.message) or ""
    subject = f.module or f.file
    if subject and subject not in message:
        message = f"`{subject}`: {message}"
    refs = _refs(g.assumptions, g, notes)
    out = [f"- **{f.severity.value} `{f.code}` {f.name}** · {f.consequence.value} · {escape(where)}{refs}  ",
           f"  {inline(message)}"]
    if g.error_text:
        out[-1] += "  "
        out.append(f"  Framework prints: {_code(clean(g.text(g.error_text) or ''))}")
    hint = g.text(g.hint)
    if hint and notes is not None:
        hint = _with_note(hint, f.hint_note, notes)
    assumes = "; ".join(g.text(a) or "" for a in g.assumptions) if notes is None else None
    for label, value in (("Fix", hint), ("Assumes", assumes), ("Left out", g.reason)):
        if value:
            out[-1] += "  "
            out.append(f"  {label}: {inline(value)}")
    return out


def _refs(assumptions, g: Group, notes) -> str:
    if notes is None:
        return ""
    return "".join(" " + escape(notes.ref("assumes " + (g.text(a) or ""))) for a in assumptions)


def _shared_family(fam: list[Group], report: Report, notes) -> list[str]:
    """Findings of one rule that share their explanation and fix (``Finding.family``): both once,
    then the members by release set, one bullet each with what the framework prints."""
    split = split_family(fam, [t.id for t in report.targets])
    every, one = split.targets, split.one
    f = fam[0].finding
    refs = _refs(fam[0].assumptions, fam[0], notes) if one else ""
    out = [f"- **{f.severity.value} `{f.code}` {f.name}** · {f.consequence.value} · "
           f"{escape(release_ranges(every, report.targets))}{refs} · {len(fam)} findings  ",
           f"  {inline(Group(f, every).text(fam[0].family) or '')}"]
    if f.family_hint:
        out[-1] += "  "
        out.append(f"  Fix: {inline(_with_note(f.family_hint, f.hint_note, notes))}")
    for targets, assumptions, members in split.subsets:
        indent = "  "
        if not one:
            out.append(f"  - {escape(release_ranges(list(targets), report.targets))}"
                       f"{_refs(assumptions, members[0], notes)}")
            indent = "    "
        for g in members:
            if g.brief:
                out.append(f"{indent}- {inline(g.text(g.brief) or '')}")
            if g.error_text:
                out[-1] += "  "
                out.append(f"{indent}  Framework prints: {_code(clean(g.text(g.error_text) or ''))}")
    return out


def section(report: Report, level: int = 2) -> list[str]:
    """One checkpoint: heading, what was checked, matrix, findings, left-out findings."""
    ck = report.checkpoint
    h = "#" * level
    lines = [f"{h} ckptlint: `{clean(ck.root).replace('`', '')}`", ""]
    if report.input_note:
        lines += [f"> {escape(report.input_note)}", ""]
    c = report.counts()
    sev = c["by_severity"]
    lines += [f"{len(ck.tensors):,} tensors in {len(ck.shards)} shard file(s); {c['total']} finding(s): "
              f"{sev['error']} error(s), {sev['warning']} warning(s), {sev['info']} info.", ""]
    lines += matrix(report)
    groups = sort_groups(group_findings(report.findings), [t.id for t in report.targets])
    if groups:
        notes = Notes()
        lines += ["", f"{h}# Findings", ""]
        for fam in families(groups):
            if len(fam) > 1 and _family_key(fam[0])[0] == "shared":
                lines += _shared_family(fam, report, notes)
            else:
                for g in fam:
                    lines += entry(g, report, notes)
        if notes.texts:
            lines.append("")
            lines += [f"{escape(f'[{i}]')} {inline(t)}  " for i, t in enumerate(notes.texts, 1)]
            lines[-1] = lines[-1].rstrip()
    if report.accepted:
        lines += ["", f"{h}# Left out (configuration or baseline; the verdicts above still count them)", ""]
        acc = report.accepted
        for g in sort_groups(group_findings([a.finding for a in acc], [a.reason for a in acc]),
                             [t.id for t in report.targets]):
            lines += entry(g, report)
    return lines


def render(report: Report, level: int = 2) -> str:
    return "\n".join(section(report, level)) + "\n"
