"""Plain-text report, for a terminal or a log.

Layout: a header (what was read, on which releases, under which assumptions), then one entry per
finding with the releases it applies to as ranges (:mod:`ckptlint.render.grouping`), the count
line, the verdict matrix (one row per release; :mod:`ckptlint.verdict`), and the findings that
configuration or a baseline left out, with their reasons.

Lines are wrapped to ``Style.width`` (the terminal's width, else ``$COLUMNS``, else 100); colour
is used only when ``Style.color`` says so (the command line decides: a terminal, and
``NO_COLOR`` unset). Everything taken from the checkpoint is printed through
:func:`ckptlint.render.safe.clean`, and the whole text through
:func:`~ckptlint.render.safe.defuse_commands`.
"""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass

from ckptlint.engine import Report
from ckptlint.render.grouping import Group, group_findings, release_ranges, sort_groups, split_family
from ckptlint.render.safe import clean, defuse_commands
from ckptlint.verdict import CONSEQUENCES, verdicts

DEFAULT_WIDTH = 100
MIN_WIDTH = 60

_SGR = {"error": "1;31", "warning": "1;33", "info": "1;36", "code": "1", "dim": "2", "ok": "32",
        "bad": "31", "warn": "33"}
_VERDICT_STYLE = {"loads": "ok", "degraded": "warn", "wrong-outputs": "bad", "will-not-load": "bad",
                  "not-supported": "dim", "no-verdict": "warn"}


@dataclass(frozen=True)
class Style:
    color: bool = False
    width: int = DEFAULT_WIDTH

    def paint(self, text: str, what: str) -> str:
        return f"\x1b[{_SGR[what]}m{text}\x1b[0m" if self.color and text else text


def default_width() -> int:
    """$COLUMNS if set (terminals and CI runners set it), else 100; never below 60."""
    try:
        cols = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        cols = DEFAULT_WIDTH
    return max(MIN_WIDTH, cols)


def wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    """``text`` filled to ``width`` with the indents given; names are never broken inside."""
    return textwrap.wrap(text, width=width, initial_indent=first, subsequent_indent=rest,
                         break_long_words=False, break_on_hyphens=False) or [first.rstrip()]


def _varying(report: Report, value_of) -> str | None:
    """One per-release value as "v" (the same everywhere) or "v1 (sglang 0.5.5–0.5.9); v2 (…)"."""
    by_value: dict[str, list[str]] = {}
    for t in report.targets:
        v = value_of(t)
        if v:
            by_value.setdefault(v, []).append(t.id)
    if not by_value:
        return None
    if len(by_value) == 1 and len(next(iter(by_value.values()))) == len(report.targets):
        return next(iter(by_value))
    return "; ".join(f"{v} ({release_ranges(ids, report.targets)})" for v, ids in by_value.items())


def _model(plan) -> str | None:
    if plan is None:
        return None
    bits = [plan.arch_name] if plan.arch_name else []
    if plan.quant is not None:
        bits.append(plan.quant.method_key + (f" {plan.quant.default_scheme.name}" if plan.quant.default_scheme else ""))
    return ", ".join(bits) or None


def header(report: Report, style: Style) -> list[str]:
    ck = report.checkpoint
    n = len(ck.shards)
    lines = wrap(clean(f"{ck.root}: {len(ck.tensors):,} tensors in {n} shard file{'s' if n != 1 else ''}"),
                 style.width, "", "  ")
    if report.input_note:
        lines += wrap(clean(report.input_note), style.width, "  ", "  ")
    if not report.targets:
        return lines
    plans = report.plans
    rows = [("checked", f"{release_ranges([t.id for t in report.targets], report.targets)}"
                        + (f" ({len(report.targets)} releases)" if len(report.targets) > 1 else "")),
            ("model", _varying(report, lambda t: _model(plans.get(t.id)))),
            ("draft", _varying(report, lambda t: plans[t.id].draft.cls if t.id in plans and plans[t.id].draft else None)),
            ("assuming", _varying(report, lambda t: plans[t.id].deployment_text if t.id in plans else None))]
    for label, value in rows:
        if value:
            lines += wrap(clean(value), style.width, f"{label:<10}", " " * 10)
    return lines


def _subject(g: Group) -> str | None:
    f = g.finding
    return f.module or f.file or (f.tensors[0] if f.tensors else None)


class Notes:
    """Sentences that apply to many findings (an assumption, the shared part of a fix), printed once
    at the end of the findings and referred to as ``[n]``."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.legend: str | None = None  # a sign the entries use, explained once above the notes

    def ref(self, text: str) -> str:
        if text not in self.texts:
            self.texts.append(text)
        return f"[{self.texts.index(text) + 1}]"

    def lines(self, width: int) -> list[str]:
        out: list[str] = [self.legend] if self.legend else []
        for i, t in enumerate(self.texts, 1):
            out += wrap(clean(t), width, f"[{i}] ", " " * (len(str(i)) + 3))
        return out


def _where(g: Group, report: Report) -> str:
    return release_ranges(g.targets, report.targets) if g.targets else "checkpoint"


def _head(g: Group, report: Report, style: Style, notes: Notes, count: int = 1) -> list[str]:
    f = g.finding
    sev = f.severity.value
    refs = "".join(" " + notes.ref("assumes " + (g.text(a) or "")) for a in g.assumptions)
    tail = f"{refs} \u2014 {count} findings" if count > 1 else refs
    where = _where(g, report)
    plain = f"{sev} {f.code} {f.name} [{f.consequence.value}] {where}{tail}"
    head = f"{style.paint(sev, sev)} {style.paint(f.code, 'code')} {f.name} [{f.consequence.value}] "
    if len(plain) <= style.width:
        return [head + where + tail]
    return [head.rstrip(), *wrap(where + tail, style.width, "    ", "    ")]


def _body(g: Group, style: Style, notes: Notes, first: str, rest: str) -> list[str]:
    """The message (with its subject), the framework's error, the fix and why it was left out."""
    f = g.finding
    message = clean(g.text(g.message) or "")
    subject = _subject(g)
    if subject and subject not in message:
        message = f"{clean(subject)}: {message}"
    width = style.width
    out = wrap(message, width, first, rest + "  ")
    if g.error_text:
        out += wrap(clean(g.text(g.error_text) or ""), width, rest + "framework prints: ", rest + "  ")
    if g.hint:
        hint = _with_note(g.text(g.hint) or "", f.hint_note, notes)
        out += wrap(clean(hint), width, rest + "fix: ", rest + "  ")
    if g.reason:
        out += wrap(clean(g.reason), width, rest + "left out: ", rest + "  ")
    return out


def entry(g: Group, report: Report, style: Style, notes: Notes | None = None) -> list[str]:
    """One finding (on all the releases of its group): a head line, the message, the framework's
    error and the fix; the subject is named once, shared sentences as ``[n]`` (``notes``)."""
    notes = notes if notes is not None else Notes()
    return _head(g, report, style, notes) + _body(g, style, notes, "  ", "  ")


def _family_key(g: Group) -> tuple:
    f = g.finding
    if g.family and g.brief is not None:
        return ("shared", f.code, f.severity, f.consequence, g.reason, g.family, f.family_hint)
    return (f.code, f.severity, f.consequence, tuple(g.targets), g.assumptions, g.reason)


def families(groups: list[Group]) -> list[list[Group]]:
    """Entries shown under one head line: every entry of one rule and consequence whose rule gave
    the same shared explanation (``Finding.family``), on whatever releases, and otherwise runs of
    consecutive entries of one rule, consequence, release set and assumptions."""
    out: list[list[Group]] = []
    shared: dict[tuple, list[Group]] = {}
    for g in groups:
        key = _family_key(g)
        if key[0] == "shared":
            if key in shared:
                shared[key].append(g)
                continue
            shared[key] = [g]
            out.append(shared[key])
        elif out and _family_key(out[-1][0]) == key:
            out[-1].append(g)
        else:
            out.append([g])
    return out


def _with_note(text: str, note: str | None, notes: Notes) -> str:
    """``text`` with its shared note " (NOTE)" replaced by a reference to the note printed once."""
    if note and f" ({note})" in text:
        return text.replace(f" ({note})", " " + notes.ref(note[:1].upper() + note[1:] + "."), 1)
    return text


def _shared_family(fam: list[Group], report: Report, style: Style, notes: Notes) -> list[str]:
    """A family whose members share their explanation and fix: both once, then the members by
    release set (with that set's assumptions), one bullet each, with what the framework prints."""
    split = split_family(fam, [t.id for t in report.targets])
    one = split.one  # one release set and assumptions: said in the head line, no sub-heads
    union = Group(fam[0].finding, split.targets, assumptions=fam[0].assumptions if one else ())
    out = _head(union, report, style, notes, len(fam))
    f = fam[0].finding
    width = style.width
    explain = union.text(fam[0].family) or ""
    out += wrap(clean(explain), width, "  ", "    ")
    if f.family_hint:
        out += wrap(clean(_with_note(f.family_hint, f.hint_note, notes)), width, "  fix: ", "    ")
    for targets, assumptions, members in split.subsets:
        if not one:
            refs = "".join(" " + notes.ref("assumes " + (members[0].text(a) or "")) for a in assumptions)
            out += wrap(clean(_where(members[0], report)) + refs + ":", width, "  ", "    ")
        for g in members:
            if g.brief:
                out += wrap(clean(g.text(g.brief) or ""), width, "  - ", "    ")
            if g.error_text:
                notes.legend = "→ what the framework prints"
                out += wrap(clean(g.text(g.error_text) or ""), width, "  → ", "    ")
    return out


def family_lines(fam: list[Group], report: Report, style: Style, notes: Notes) -> list[str]:
    if len(fam) == 1:
        return entry(fam[0], report, style, notes)
    if _family_key(fam[0])[0] == "shared":
        return _shared_family(fam, report, style, notes)
    out = _head(fam[0], report, style, notes, len(fam))
    for g in fam:
        out += _body(g, style, notes, "  - ", "    ")
    return out


def summary_line(report: Report, shown: int | None = None) -> str:
    """How many findings the report shows, and (when a finding applies to several releases) how
    many finding × release pairs they stand for, which the severity counts count."""
    c = report.counts()
    sev = c["by_severity"]
    counts = f"{sev['error']} error(s), {sev['warning']} warning(s), {sev['info']} info"
    if shown is None or shown == c["total"]:
        return f"Found {c['total']} finding(s): {counts}."
    return f"Found {shown} finding(s) ({c['total']} counting each release): {counts}."


def _rows(report: Report) -> list[tuple[list[str], object]]:
    """Verdicts of consecutive releases of one framework that agree in every column, as one row."""
    rows: list[tuple[list[str], object]] = []
    last = None
    for v in verdicts(report):
        fw = v.target.partition("==")[0]
        key = (fw, tuple(v.counts[c] for c in CONSEQUENCES), v.status, v.label)
        if rows and key == last:
            rows[-1][0].append(v.target)
        else:
            rows.append(([v.target], v))
        last = key
    return rows


def matrix(report: Report, style: Style = Style()) -> list[str]:
    """One row per release (consecutive releases with the same row as one range), one column per
    consequence (reported findings), and the verdict."""
    if not report.targets:
        return []
    rows = _rows(report)
    names = [ids[0] if len(ids) == 1 else release_ranges(ids, report.targets) for ids, _ in rows]
    width = max(len("release"), *(len(n) for n in names))
    head = "release".ljust(width) + "  " + "  ".join(CONSEQUENCES) + "  verdict"
    out = ["", head]
    for name, (ids, v) in zip(names, rows):
        cells = "  ".join(str(v.counts[c]).rjust(len(c)) for c in CONSEQUENCES)
        out.append(f"{name.ljust(width)}  {cells}  {style.paint(v.label, _VERDICT_STYLE[v.status])}")
    if any(f.target is None for f in report.findings):
        out.append("(checkpoint-wide findings are counted on every row)")
    return out


def left_out(report: Report, style: Style) -> list[str]:
    """The findings configuration or a baseline left out, one line each with its reason (rules
    that were not selected are summarised by code: with --select they can be many)."""
    if not report.accepted:
        return []
    shown = [a for a in report.accepted if a.reason != "rule not selected"]
    unselected = [a for a in report.accepted if a.reason == "rule not selected"]
    lines = ["", f"Left out of the findings above ({report.ignored['by_config']} by configuration, "
                 f"{report.ignored['by_baseline']} by baseline; the verdicts above still count them):"]
    groups = sort_groups(group_findings([a.finding for a in shown], [a.reason for a in shown]),
                         [t.id for t in report.targets])
    for g in groups:
        f = g.finding
        subject = _subject(g)
        what = f"{f.severity.value} {f.code} [{f.consequence.value}] {_where(g, report)}" + \
            (f" `{subject}`" if subject else "") + f": {g.reason}"
        lines += wrap(clean(what), style.width, "  ", "    ")
    if unselected:
        codes: dict[str, int] = {}
        for a in unselected:
            codes[a.finding.code] = codes.get(a.finding.code, 0) + 1
        lines += wrap(", ".join(f"{c} ({n})" for c, n in sorted(codes.items())), style.width,
                      "  rules not selected: ", "    ")
    return lines


def render(report: Report, verbose: bool = False, style: Style | None = None) -> str:
    style = style or Style(width=default_width())
    lines = header(report, style)
    groups = sort_groups(group_findings(report.findings), [t.id for t in report.targets])
    notes = Notes()
    for fam in families(groups):
        lines.append("")
        lines += family_lines(fam, report, style, notes)
    if notes.texts or notes.legend:
        lines.append("")
        lines += notes.lines(style.width)
    lines += ["", *wrap(summary_line(report, len(groups)), style.width, "", "  ")]
    lines += matrix(report, style)
    lines += left_out(report, style)
    return defuse_commands("\n".join(lines)) + "\n"
