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
from ckptlint.render.grouping import Group, group_findings, release_ranges, sort_groups
from ckptlint.render.safe import clean, defuse_commands
from ckptlint.verdict import CONSEQUENCES, verdicts

DEFAULT_WIDTH = 100
MIN_WIDTH = 60

_SGR = {"error": "1;31", "warning": "1;33", "info": "1;36", "code": "1", "dim": "2", "ok": "32",
        "bad": "31", "warn": "33"}
_VERDICT_STYLE = {"loads": "ok", "degraded": "warn", "wrong-outputs": "bad", "will-not-load": "bad",
                  "not-supported": "dim"}


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


def entry(g: Group, report: Report, style: Style) -> list[str]:
    """One finding (on all the releases of its group): a head line, the message, the framework's
    error, the fix, the assumptions; the subject is named once."""
    f = g.finding
    where = release_ranges(g.targets, report.targets) if g.targets else "checkpoint"
    sev = f.severity.value
    head = f"{style.paint(sev, sev)} {style.paint(f.code, 'code')} {f.name} [{f.consequence.value}] {where}"
    head_plain = f"{sev} {f.code} {f.name} [{f.consequence.value}] {where}"
    out = [head] if len(head_plain) <= style.width else \
        [head.replace(where, ""), *wrap(where, style.width, "    ", "    ")]
    message = clean(g.text(g.message) or "")
    subject = _subject(g)
    if subject and subject not in message:
        message = f"{clean(subject)}: {message}"
    width = style.width
    out += wrap(message, width, "  ", "    ")
    if g.error_text:
        out += wrap(clean(g.text(g.error_text) or ""), width, "  framework prints: ", "    ")
    if g.hint:
        out += wrap(clean(g.text(g.hint) or ""), width, "  fix: ", "    ")
    if g.assumptions:
        out += wrap(clean("; ".join(g.text(a) or "" for a in g.assumptions)), width, "  assumes: ", "    ")
    if g.reason:
        out += wrap(clean(g.reason), width, "  left out: ", "    ")
    return out


def summary_line(report: Report) -> str:
    c = report.counts()
    sev = c["by_severity"]
    return (f"Found {c['total']} finding(s): {sev['error']} error(s), {sev['warning']} warning(s), "
            f"{sev['info']} info.")


def matrix(report: Report, style: Style = Style()) -> list[str]:
    """One row per release, one column per consequence (reported findings), and the verdict."""
    if not report.targets:
        return []
    width = max(len("release"), *(len(t.id) for t in report.targets))
    head = "release".ljust(width) + "  " + "  ".join(CONSEQUENCES) + "  verdict"
    rows = ["", head]
    for v in verdicts(report):
        cells = "  ".join(str(v.counts[c]).rjust(len(c)) for c in CONSEQUENCES)
        rows.append(f"{v.target.ljust(width)}  {cells}  {style.paint(v.label, _VERDICT_STYLE[v.status])}")
    if any(f.target is None for f in report.findings):
        rows.append("(checkpoint-wide findings are counted on every row)")
    return rows


def left_out(report: Report, style: Style) -> list[str]:
    """The findings configuration or a baseline left out, with their reasons (rules that were not
    selected are summarised by code: with --select they can be many)."""
    if not report.accepted:
        return []
    shown = [a for a in report.accepted if a.reason != "rule not selected"]
    unselected = [a for a in report.accepted if a.reason == "rule not selected"]
    lines = ["", f"Left out of the findings above ({report.ignored['by_config']} by configuration, "
                 f"{report.ignored['by_baseline']} by baseline; the verdicts above still count them):"]
    groups = sort_groups(group_findings([a.finding for a in shown], [a.reason for a in shown]),
                         [t.id for t in report.targets])
    for g in groups:
        lines += entry(g, report, style)
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
    if groups:
        lines.append("")
    for i, g in enumerate(groups):
        if i:
            lines.append("")
        lines += entry(g, report, style)
    lines += ["", summary_line(report)]
    lines += matrix(report, style)
    lines += left_out(report, style)
    return defuse_commands("\n".join(lines)) + "\n"

