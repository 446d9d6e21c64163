"""One line per finding (``ckptlint check --format concise``), for logs and editors.

The shape of ruff's and mypy's concise output, which editors' problem matchers and ``grep``
understand::

    PATH:LINE:COL: CODE [CONSEQUENCE] RELEASES: MESSAGE

* ``PATH`` is the file the finding points at (:func:`ckptlint.render.locate.anchor`: the skip-list
  entry in ``config.json``, the index line of a tensor, a shard), relative to the working directory
  when the checkpoint lies inside it, else as the checkpoint's own path joined with the file;
  ``LINE:COL`` is the place in that file, or ``1:1`` when the finding has no line (a shard, a
  checkpoint-wide finding).
* ``RELEASES`` are the releases the finding applies to, as ranges (``sglang 0.5.9–0.5.15``), or
  ``checkpoint`` for a finding about the files themselves: a finding that says the same on several
  releases is one line, as in the text report.
* ``MESSAGE`` is the finding's message on one line; the framework's error and the fix are in the
  other formats (text, JSON).

The last line gives the verdict of every checked release, grouped by verdict
(``PATH: will not load: sglang 0.5.9–0.5.15; loads: sglang 0.5.16–0.5.23``). Everything taken from
the checkpoint is printed through :func:`ckptlint.render.safe.clean`, and no line can be taken
for a CI runner's workflow command (:func:`~ckptlint.render.safe.defuse_commands`).
"""

from __future__ import annotations

import os

from ckptlint.engine import Report
from ckptlint.render.grouping import group_findings, release_ranges, sort_groups
from ckptlint.render.locate import ArtifactPaths, Locators, anchor
from ckptlint.render.safe import clean, defuse_commands
from ckptlint.verdict import verdicts


def _path(paths: ArtifactPaths, root: str, file: str | None) -> str:
    if file is None:
        return root
    rel = paths.rel(file)
    if rel is not None:
        return rel
    base = root if os.path.isdir(root) or "://" in root else (os.path.dirname(root) or ".")
    return f"{base.rstrip('/')}/{file}"


def finding_lines(report: Report) -> list[str]:
    """One line per finding (grouped over releases), in the text report's order."""
    paths = ArtifactPaths(report.checkpoint.root)
    locs = Locators(report.checkpoint.texts)
    groups = sort_groups(group_findings(report.findings), [t.id for t in report.targets])
    out: list[str] = []
    for g in groups:
        f = g.finding
        a = anchor(report, f, locs)
        where = release_ranges(g.targets, report.targets) if g.targets else "checkpoint"
        line, col = (a.span.line, a.span.column) if a.span is not None else (1, 1)
        message = " ".join((g.text(g.message) or "").split())
        out.append(clean(f"{_path(paths, report.checkpoint.root, a.file)}:{line}:{col}: {f.code} "
                         f"[{f.consequence.value}] {where}: {message}"))
    return out


def verdict_line(report: Report) -> str:
    """Every checked release's verdict, releases with the same verdict together."""
    by_label: dict[str, list[str]] = {}
    for v in verdicts(report):
        by_label.setdefault(v.label, []).append(v.target)
    parts = [f"{label}: {release_ranges(ids, report.targets)}" for label, ids in by_label.items()]
    n = len(report.findings)
    shown = len(group_findings(report.findings))
    head = f"{report.checkpoint.root}: {shown} finding(s)" + (f" ({n} counting each release)" if n != shown else "")
    return clean(head + ("; " + "; ".join(parts) if parts else ""))


def render(report: Report) -> str:
    return defuse_commands("\n".join([*finding_lines(report), verdict_line(report)])) + "\n"
