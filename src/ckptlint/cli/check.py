"""``ckptlint check``: check a checkpoint against framework releases and report."""

import contextlib
import sys
from typing import Annotated, Optional

import typer

from ckptlint.cli import common
from ckptlint.cli.common import EXIT_FINDINGS, EXIT_OK, CheckFormat, FailOn, PathArg, SharedArgs, TargetsOpt, usage_error


@common.with_options
def check(
    path: PathArg,
    target: TargetsOpt = None,
    format: Annotated[CheckFormat, typer.Option("--format", "-f", help="Output format: text, json, sarif (SARIF 2.1.0) or github (workflow-command annotations, then the text report).")] = CheckFormat.text,
    fail_on: Annotated[Optional[FailOn], typer.Option("--fail-on", help="Lowest severity that makes the exit code 1 (default error).")] = None,
    select: Annotated[Optional[list[str]], typer.Option("--select", help="Only these rules: codes, prefixes (QD, QD4), names or ALL; replaces the config's select.")] = None,
    ignore: Annotated[Optional[list[str]], typer.Option("--ignore", help="Drop these rules (codes, prefixes, names).")] = None,
    extend_select: Annotated[Optional[list[str]], typer.Option("--extend-select", help="Add these rules to the selection.")] = None,
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="Write the report to this file.")] = None,
    baseline: Annotated[Optional[str], typer.Option("--baseline", help="Drop findings recorded in this baseline file (report only new ones).")] = None,
    write_baseline: Annotated[Optional[str], typer.Option("--write-baseline", help="Record the current findings' fingerprints in this file and exit 0.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress line on stderr.")] = False,
    *,
    shared: SharedArgs,
) -> None:
    """Check a checkpoint against one or more framework releases."""
    from ckptlint.reader import NotACheckpoint, Source, open_path

    try:
        src = open_path(path, endpoint=shared.endpoint, progress=not quiet)
    except NotACheckpoint as exc:
        usage_error(str(exc))
    # A source starts reading shard headers in the background now, while the rest is set up.
    with src if isinstance(src, Source) else contextlib.nullcontext(src):
        cfg = common.settings(path, shared)
        selection, known = _selection_and_baseline(cfg, select, extend_select, ignore, baseline)
        targets = common.targets(target or cfg.config.target)
        dep = common.deployment(cfg, shared)
        report = _run(src, targets, dep, selection, known)
        report.config_file = str(cfg.path) if cfg.path else None
        if write_baseline:
            _write_baseline(report, write_baseline)
        _say_dropped(report, cfg, baseline)
        _emit(_render(report, format), output)
        threshold = _threshold(fail_on, cfg)
        failing = any(f.severity.rank >= threshold for f in report.findings) and not write_baseline
        raise typer.Exit(EXIT_FINDINGS if failing else EXIT_OK)


def _selection_and_baseline(cfg, select, extend_select, ignore, baseline):
    from ckptlint import baseline as bl
    from ckptlint import selection as sel

    try:
        selection = sel.build([cfg.selection_layer(), sel.Layer(
            select=sel.split_flags(select), extend_select=sel.split_flags(extend_select) or (),
            ignore=sel.split_flags(ignore) or ())], cfg.ignore_rules())
        known = bl.load(baseline) if baseline else None
    except (sel.SelectorError, bl.BaselineError) as exc:
        usage_error(str(exc))
    return selection, known


def _run(src, targets, dep, selection, known):
    from ckptlint.engine import check as run_check
    from ckptlint.reader import NotACheckpoint

    try:
        report = run_check(src, targets, dep, selection, known)  # type: ignore[arg-type]
    except NotACheckpoint as exc:
        usage_error(str(exc))
    if common.KEEP_UNTIL_EXIT is not None:
        common.KEEP_UNTIL_EXIT.append(report)
    return report


def _write_baseline(report, path: str) -> None:
    """Record the selected findings, one fingerprint per module (before any baseline is applied)."""
    from ckptlint import baseline as bl

    try:
        n = bl.write(path, report.selected)
    except bl.BaselineError as exc:
        usage_error(str(exc))
    typer.echo(f"ckptlint: wrote {n} fingerprint(s) to {path}", err=True)


def _say_dropped(report, cfg, baseline) -> None:
    dropped = ([f"{report.ignored['by_config']} by rule selection and ignores"
                + (f" ({cfg.label})" if cfg.path else "")] if report.ignored["by_config"] else []) \
        + ([f"{report.ignored['by_baseline']} by baseline {baseline}"] if report.ignored["by_baseline"] else [])
    if dropped:
        typer.echo(f"ckptlint: finding(s) ignored: {', '.join(dropped)}", err=True)


def _render(report, format: CheckFormat) -> str:
    if format is CheckFormat.json:
        from ckptlint.render.json_out import render
    elif format is CheckFormat.sarif:
        from ckptlint.render.sarif import render
    elif format is CheckFormat.github:
        from ckptlint.render.github import render
    else:
        from ckptlint.render.text import render
    return render(report)


def _emit(text: str, output: str | None) -> None:
    if output:
        from ckptlint.fsutil import write_output

        try:
            write_output(output, text.encode("utf-8"))
        except OSError as exc:
            usage_error(f"cannot write {output}: {exc.strerror or exc}")
    else:
        sys.stdout.write(text)


def _threshold(fail_on: FailOn | None, cfg) -> int:
    from ckptlint.findings import Severity

    return Severity(fail_on.value if fail_on else (cfg.config.fail_on or "error")).rank
