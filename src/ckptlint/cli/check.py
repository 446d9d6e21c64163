"""``ckptlint check``: check one or more checkpoints against framework releases and report."""

import os
import sys
import time
from enum import Enum
from typing import Annotated, Optional

from ckptlint.cli import common
from ckptlint.cli.common import (EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, Argument, CheckFormat, FailOn, KvFractionOpt,
                                 NoVerdict, Option, SharedArgs, TargetsOpt, echo, usage_error)


class Color(str, Enum):
    auto = "auto"
    always = "always"
    never = "never"


PathsArg = Annotated[list[str], Argument(
    help="Checkpoints: directories, files of a checkpoint (a .safetensors shard stands for the checkpoint "
         "beside it), or hf://ORG/REPO[@REVISION]. Several are checked concurrently.")]


ReportOpt = Annotated[Optional[list[str]], Option(
    "--report", help="Also write the report in another format to a file, FORMAT:FILE (e.g. sarif:ckptlint.sarif, "
    "markdown:summary.md); repeatable. One check, several reports.")]


@common.with_options
def check(
    path: PathsArg,
    target: TargetsOpt = None,
    format: Annotated[CheckFormat, Option("--format", "-f", help="text, json, jsonl (one JSON line per checkpoint), markdown (job summaries, PR comments), sarif (SARIF 2.1.0), github (workflow-command annotations, then the text report) or concise (one line per finding: PATH:LINE:COL: CODE [consequence] releases: message).")] = CheckFormat.text,
    fail_on: Annotated[Optional[FailOn], Option("--fail-on", help="Lowest severity that makes the exit code 1 (default error).")] = None,
    no_verdict: Annotated[Optional[NoVerdict], Option("--no-verdict", help="What a release with no verdict (not simulated, newer than the target data, or a container-only check) does to the exit code: fail (exit 1, the default) or pass.")] = None,
    select: Annotated[Optional[list[str]], Option("--select", help="Only these rules: codes, prefixes (QD, QD4), names or ALL; replaces the config's select.")] = None,
    ignore: Annotated[Optional[list[str]], Option("--ignore", help="Drop these rules (codes, prefixes, names).")] = None,
    extend_select: Annotated[Optional[list[str]], Option("--extend-select", help="Add these rules to the selection.")] = None,
    output: Annotated[Optional[str], Option("--output", "-o", help="Write the report to this file.")] = None,
    report: ReportOpt = None,
    baseline: Annotated[Optional[str], Option("--baseline", help="Drop findings recorded in this baseline file (report only new ones); with several checkpoints, each takes the entries under its own key.")] = None,
    write_baseline: Annotated[Optional[str], Option("--write-baseline", help="Record the current findings' fingerprints in this file and exit 0 (several checkpoints: one file, keyed by checkpoint); prints one line, and the report only with --output.")] = None,
    kv_cache_fraction: KvFractionOpt = None,
    color: Annotated[Color, Option("--color", help="Colour in the text report: auto (a terminal, unless NO_COLOR is set), always, never.")] = Color.auto,
    quiet: Annotated[bool, Option("--quiet", "-q", help="No progress on stderr.")] = False,
    *,
    shared: SharedArgs,
) -> None:
    """Check checkpoints against one or more framework releases."""
    from ckptlint import batch
    from ckptlint.selection import split_flags

    paths = _distinct(path)
    # resolved once, here: a bad --target is a usage error before anything is read, and every checkpoint's
    # check gets the releases themselves
    resolved = common.resolve_targets(target) if target else None
    extra = _extra_reports(report or [])
    tty = _is_tty(sys.stdout) and not output
    req = batch.CheckRequest(
        shared=shared, targets=resolved,
        formats=tuple(dict.fromkeys([format.value, *(f for f, _ in extra)])),
        fail_on=fail_on.value if fail_on else None, select=_tuple(split_flags(select)),
        extend_select=_tuple(split_flags(extend_select)), ignore=_tuple(split_flags(ignore)),
        baseline=baseline, write_baseline=write_baseline, kv_cache_fraction=kv_cache_fraction,
        no_verdict=no_verdict.value if no_verdict else None,
        color=format is CheckFormat.text and _color(color, tty), width=_width(tty),
        progress=not quiet and len(paths) == 1, many=len(paths) > 1)
    outcomes = _run(paths, req, format.value, output, quiet)
    if write_baseline and len(paths) > 1:
        echo(batch.write_many_baseline(outcomes, write_baseline))
    # --write-baseline records findings: its one line (on stderr) is the output, unless --output asks for the report
    _write_reports(outcomes, format.value, output, extra, req.color, stdout=not write_baseline or bool(output))
    code = EXIT_USAGE if any(o.error is not None for o in outcomes) else \
        EXIT_FINDINGS if any(o.failing for o in outcomes) else EXIT_OK
    raise SystemExit(code)


def _distinct(paths: list[str]) -> list[str]:
    """The inputs, each checkpoint once: files of the same checkpoint (``ckpt/*.safetensors``, or the file
    names pre-commit passes) stand for one check, under the first name given."""
    from ckptlint.inputs import resolve_input

    seen: set[str] = set()
    out = []
    for p in paths:
        target = resolve_input(p)[0]
        key = target if target.startswith("hf://") else os.path.realpath(target)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def _extra_reports(specs: list[str]) -> list[tuple[str, str]]:
    out = []
    for spec in specs:
        fmt, sep, file = spec.partition(":")
        if not sep or not file or fmt not in CheckFormat.__members__:
            usage_error(f"--report {spec!r}: expected FORMAT:FILE with FORMAT one of {', '.join(CheckFormat.__members__)}")
        out.append((fmt, file))
    return out


def _tuple(values):
    return tuple(values) if values is not None else None


def _is_tty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _color(mode: Color, tty: bool) -> bool:
    if mode is not Color.auto:
        return mode is Color.always
    return tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def _width(tty: bool) -> int:
    from ckptlint.render.text import MIN_WIDTH, default_width

    if tty:
        import shutil

        return max(MIN_WIDTH, shutil.get_terminal_size().columns)
    return default_width()


def _run(paths: list[str], req, fmt: str, output: str | None, quiet: bool) -> list:
    """Check every checkpoint; one alone reports a usage problem as exit 2 straight away."""
    from ckptlint import batch
    from ckptlint.render import multi

    if len(paths) == 1:
        out = batch.check_one(paths[0], req)
        if out.error is not None:
            usage_error(out.error)
        for note in out.notes:
            echo(note)
        return [out]
    progress = _Progress(len(paths), enabled=not quiet)
    stream = fmt == "jsonl" and not output

    def on_result(i: int, o) -> None:
        progress.done(o)
        for note in o.notes:
            echo(f"{o.path}: {note}")
        if stream:
            progress.clear()
            sys.stdout.write(o.outputs["jsonl"] if o.error is None else multi.error_line(o))
            sys.stdout.flush()

    outcomes = batch.run_many(paths, req, on_result=on_result)
    progress.finish(outcomes)
    return outcomes


def _write_reports(outcomes: list, fmt: str, output: str | None, extra: list[tuple[str, str]], color: bool,
                   stdout: bool = True) -> None:
    from ckptlint.render import multi

    if stdout and not (fmt == "jsonl" and not output and len(outcomes) > 1):  # (streamed already)
        common.emit(multi.render(outcomes, fmt, color), output)
    for f, file in extra:
        common.emit(multi.render(outcomes, f, False), file)


class _Progress:
    """``[12/50] path: 2 releases fail`` on stderr as checkpoints finish: rewritten in place on a
    terminal; elsewhere (a CI log) a line at most every few seconds, and the last one."""

    EVERY = 5.0

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.enabled, self.count = total, enabled, 0
        self.tty = _is_tty(sys.stderr)
        self.last = time.monotonic()
        self.width = 0

    def done(self, o) -> None:
        self.count += 1
        if not self.enabled:
            return
        bad = sum(1 for v in o.verdicts if v["verdict"] in ("will-not-load", "wrong-outputs", "not-supported"))
        unknown = sum(1 for v in o.verdicts if v["verdict"] == "no-verdict")
        what = f"error: {o.error}" if o.error is not None else \
            (f"fails on {bad} of {len(o.verdicts)} release(s)" if bad else f"{len(o.verdicts)} release(s) checked") \
            + (f", no verdict on {unknown}" if unknown and o.error is None else "")
        from ckptlint.render.safe import clean

        line = clean(f"ckptlint: [{self.count}/{self.total}] {o.path}: {what}")
        now = time.monotonic()
        if self.tty:
            sys.stderr.write("\r" + line[:200].ljust(self.width))
            self.width = min(200, len(line))
            sys.stderr.flush()
        elif now - self.last >= self.EVERY or self.count == self.total:
            sys.stderr.write(line + "\n")
            self.last = now

    def clear(self) -> None:
        if self.tty and self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            self.width = 0

    def finish(self, outcomes) -> None:
        self.clear()
        if self.enabled:
            secs = sum(o.seconds for o in outcomes)
            echo(f"ckptlint: checked {len(outcomes)} checkpoints ({secs:.1f} s of checking)")
