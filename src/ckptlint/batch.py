"""Checking one checkpoint, or many at once: what ``ckptlint check`` and ``ckptlint upgrade`` run
for each checkpoint (:func:`check_one`) and how many checkpoints are run concurrently
(:func:`run_many`).

A checkpoint's result is an :class:`Outcome`: its report rendered in the requested format, its
verdict per release (:mod:`ckptlint.verdict`), whether it fails the run, and the lines for
stderr. A problem with one checkpoint of many (not a checkpoint, a bad settings file beside it) is
its outcome's ``error``; the others are still checked.

Several checkpoints run in worker processes (forked where the platform can, so rules and target
data are imported once), as many as there are CPUs (``CKPTLINT_JOBS`` sets it; at least 4 when a
checkpoint is remote, since those wait on the network). Results come back in the order the
checkpoints were given, each as soon as it and those before it are done.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from ckptlint import baseline as bl, engine, options, selection as sel
from ckptlint.findings import Severity
from ckptlint.inputs import not_a_checkpoint, resolve_input
from ckptlint.options import ResolvedTargets, SharedArgs, UsageError
from ckptlint.outcome import Outcome
from ckptlint.reader import NotACheckpoint, Source, open_path
from ckptlint.verdict import NO_VERDICT, verdicts

__all__ = ["CheckRequest", "Outcome", "check_one", "jobs_for", "render", "run_many", "write_many_baseline"]

@dataclass(frozen=True)
class CheckRequest:
    """What to check and how to report it, the same for every checkpoint of a run (picklable)."""

    shared: SharedArgs = SharedArgs()
    # --target, resolved once by the command (targets are pickled by release); None: each checkpoint's
    # settings' target, else the default
    targets: ResolvedTargets | None = None
    formats: tuple[str, ...] = ("text",)  # text | markdown | json | jsonl | sarif | github; () for none
    fail_on: str | None = None
    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    baseline: str | None = None
    write_baseline: str | None = None
    kv_cache_fraction: float | None = None
    no_verdict: str | None = None  # "fail" | "pass": does a release with no verdict fail the run (default fail)
    color: bool = False
    width: int = 100
    progress: bool = False  # a progress line while reading shards (one checkpoint on a terminal)
    many: bool = False  # one of several checkpoints (Markdown sections one level down)


def _selection(cfg, req: CheckRequest, checkpoint: str, out: Outcome):
    try:
        selection = sel.build([cfg.selection_layer(), sel.Layer(
            select=list(req.select) if req.select is not None else None,
            extend_select=req.extend_select or (), ignore=req.ignore or ())], cfg.ignore_rules())
        known = None
        if req.baseline:
            loaded = bl.load_file(req.baseline)
            if loaded.version == 1 and req.many:
                raise bl.BaselineError(f"{req.baseline}: a baseline of one checkpoint (format 1) names no "
                                       "checkpoint, so it cannot be used for several: rewrite it with "
                                       "--write-baseline over the same paths (format 2, keyed by checkpoint)")
            known, note = loaded.known(checkpoint)
            if note:
                out.notes.append(f"ckptlint: {note}")
    except (sel.SelectorError, bl.BaselineError) as exc:
        raise UsageError(str(exc)) from None
    return selection, known


def _report(path: str, req: CheckRequest, out: Outcome):
    """Read and check one checkpoint: the finished report (selected, baselined, aggregated)."""
    import contextlib

    target, note = resolve_input(path)
    try:
        src = open_path(target, endpoint=req.shared.endpoint, progress=req.progress)
    except NotACheckpoint as exc:
        raise UsageError(str(exc)) from None
    # A source starts reading shard headers in the background now, while the rest is set up.
    with src if isinstance(src, Source) else contextlib.nullcontext(src):
        cfg = options.settings(target, req.shared)
        selection, known = _selection(cfg, req, target, out)
        resolved = req.targets if req.targets is not None else options.resolve_targets(cfg.config.target)
        targets, range_notes = list(resolved.targets), list(resolved.notes)
        dep = options.deployment(cfg, req.shared, memory=True, kv_cache_fraction=req.kv_cache_fraction)
        try:
            report = engine.check(src, targets, dep, selection, known)  # type: ignore[arg-type]
        except NotACheckpoint as exc:
            raise UsageError(not_a_checkpoint(src, exc)) from None
    if options.KEEP_UNTIL_EXIT is not None:
        options.KEEP_UNTIL_EXIT.append(report)
    report.input_note = note
    report.range_notes = range_notes
    out.notes += [f"ckptlint: note: {n}" for n in range_notes]
    report.config_file = str(cfg.path) if cfg.path else None
    if req.write_baseline and req.many:  # written once for all checkpoints (write_many_baseline)
        try:
            out.baseline_entries = (bl.key(target, req.write_baseline), bl.entries(report.selected))
        except bl.BaselineError as exc:
            raise UsageError(str(exc)) from None
    elif req.write_baseline:
        _write_baseline(report, req.write_baseline, out)
    dropped = ([f"{report.ignored['by_config']} by rule selection and ignores"
                + (f" ({cfg.label})" if cfg.path else "")] if report.ignored["by_config"] else []) \
        + ([f"{report.ignored['by_baseline']} by baseline {req.baseline}"] if report.ignored["by_baseline"] else [])
    if dropped:
        out.notes.append(f"ckptlint: finding(s) ignored: {', '.join(dropped)}")
    return report, cfg


def _write_baseline(report, path: str, out: Outcome) -> None:
    """Record the selected findings, one fingerprint per module (before any baseline is applied)."""
    try:
        n = bl.write(path, report.selected)
    except bl.BaselineError as exc:
        raise UsageError(str(exc)) from None
    c = report.counts()
    out.notes.append(f"ckptlint: wrote {n} fingerprint(s) to {path}, one per module and release of "
                     f"{c['total']} finding(s) on {len(report.targets)} release(s) ({c['by_severity']['error']} error(s), "
                     f"{c['by_severity']['warning']} warning(s), {c['by_severity']['info']} info)")


def write_many_baseline(outcomes: list[Outcome], path: str) -> str:
    """Write one format-2 baseline for every checkpoint of a run (keyed by checkpoint); the line for
    stderr. Nothing is written when a checkpoint could not be checked (its key would be lost)."""
    failed = [o.path for o in outcomes if o.error is not None or o.baseline_entries is None]
    if failed:
        return f"ckptlint: baseline {path} not written: {failed[0]} could not be checked"
    per = {}
    for o in outcomes:
        k, entries = o.baseline_entries  # type: ignore[misc]
        if k in per:
            raise UsageError(f"--write-baseline: {o.path} has the same baseline key {k!r} as another checkpoint")
        per[k] = entries
    try:
        n = bl.write_many(path, per)
    except bl.BaselineError as exc:
        raise UsageError(str(exc)) from None
    return f"ckptlint: wrote {n} fingerprint(s) for {len(per)} checkpoints to {path}"


def render(report, fmt: str, req: CheckRequest, out: Outcome) -> None:
    """The report in format ``fmt``, into ``out.outputs`` (github: the text report, and the annotations)."""
    if fmt == "json":
        from ckptlint.render.json_out import render as r
    elif fmt == "jsonl":
        from ckptlint.render.json_out import render_line as r
    elif fmt == "sarif":
        from ckptlint.render.sarif import render as r
    elif fmt == "concise":
        from ckptlint.render.concise import render as r
    elif fmt == "markdown":
        from ckptlint.render.markdown import render as md

        out.outputs[fmt] = md(report, 3 if req.many else 2)
        return
    elif fmt == "github":
        from ckptlint.render import github

        out.annotations = github.annotations(report)
        out.outputs[fmt] = github.report_text(report)
        return
    else:
        from ckptlint.render.text import Style
        from ckptlint.render.text import render as text_render

        out.outputs[fmt] = text_render(report, style=Style(color=req.color, width=req.width))
        return
    out.outputs[fmt] = r(report)


def check_one(path: str, req: CheckRequest) -> Outcome:
    """Check one checkpoint; a usage problem with it (not a checkpoint, bad settings beside it,
    unreadable baseline) is the outcome's ``error``."""
    t0 = time.perf_counter()
    out = Outcome(path)
    try:
        report, cfg = _report(path, req, out)
    except UsageError as exc:
        out.error = str(exc)
        out.seconds = time.perf_counter() - t0
        return out
    for fmt in req.formats:
        render(report, fmt, req, out)
    out.targets = [t.id for t in report.targets]
    vs = verdicts(report)
    out.verdicts = [v.to_json() for v in vs]
    threshold = Severity(req.fail_on or cfg.config.fail_on or "error").rank
    policy = req.no_verdict or getattr(cfg.config, "no_verdict", None) or "fail"
    unknown = [v for v in vs if v.status == NO_VERDICT]
    if unknown:
        out.notes.append(f"ckptlint: no verdict for {len(unknown)} of {len(vs)} release(s) "
                         f"({', '.join(v.target for v in unknown)}): {unknown[0].no_verdict[1]}"  # type: ignore[index]
                         + ("; this fails the check (--no-verdict pass accepts it)" if policy == "fail"
                            else "; accepted (--no-verdict pass)"))
    out.failing = (any(f.severity.rank >= threshold for f in report.findings)
                   or (policy == "fail" and bool(unknown))) and not req.write_baseline
    out.seconds = time.perf_counter() - t0
    return out


# ----------------------------------------------------------------------------- many at once

def jobs_for(paths: list[str]) -> int:
    env = os.environ.get("CKPTLINT_JOBS", "").strip()
    if env.isdecimal() and int(env) > 0:
        n = int(env)
    else:
        n = os.cpu_count() or 1
        if any(p.startswith("hf://") for p in paths):
            n = max(n, 4)
    return max(1, min(n, len(paths)))


def _init_worker() -> None:
    # The run is already parallel over checkpoints: no second process per checkpoint for shard headers.
    os.environ["CKPTLINT_JOBS"] = "1"
    options.KEEP_UNTIL_EXIT = None


def run_many(paths: list[str], req: CheckRequest, jobs: int | None = None,
             on_result: Callable[[int, Outcome], None] | None = None) -> list[Outcome]:
    """Check every path; ``on_result(i, outcome)`` is called in path order as results arrive."""
    jobs = jobs or jobs_for(paths)
    results: list[Outcome | None] = [None] * len(paths)
    emitted = 0

    def arrived(i: int, outcome: Outcome) -> None:
        nonlocal emitted
        results[i] = outcome
        while emitted < len(paths) and results[emitted] is not None:
            if on_result is not None:
                on_result(emitted, results[emitted])  # type: ignore[arg-type]
            emitted += 1

    if jobs <= 1 or len(paths) <= 1:
        for i, p in enumerate(paths):
            arrived(i, check_one(p, req))
        return results  # type: ignore[return-value]
    for i, outcome in _pool(paths, req, jobs):
        arrived(i, outcome)
    return results  # type: ignore[return-value]


def _pool(paths: list[str], req: CheckRequest, jobs: int) -> Iterable[tuple[int, Outcome]]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_init_worker) as ex:
        futures = {ex.submit(check_one, p, req): i for i, p in enumerate(paths)}
        for fut in as_completed(futures):
            yield futures[fut], fut.result()
