"""``ckptlint fix``: the minimal skip-list addition that makes the releases asked for load the checkpoint.

Exit codes (ruff's convention for ``--diff``): 0 nothing to change, or ``--write`` applied a change
that leaves nothing failing; 1 a change is pending (printed, not written), something the change
cannot fix remains, or the change gives a release a new load error; 2 usage error."""

import sys
from typing import Annotated, Optional

import typer

from ckptlint.cli import common
from ckptlint.cli.common import EXIT_FINDINGS, EXIT_OK, PathArg, SharedArgs, usage_error


@common.with_options
def fix(
    path: PathArg,
    target: Annotated[Optional[list[str]], typer.Option("--target", "-t", help="Releases the one edit must make load, as for check: FRAMEWORK==VERSION, FRAMEWORK (every verified release) or bounds such as 'vllm>=0.24'; repeatable. Default: the config's target.")] = None,
    write: Annotated[bool, typer.Option("--write", help="Apply the change (atomically; local checkpoints only) and print it as a unified diff.")] = False,
    diff: Annotated[bool, typer.Option("--diff", help="Print the change as a unified diff and write nothing (the default); exit 1 when there is a change.")] = False,
    backup: Annotated[bool, typer.Option("--backup/--no-backup", help="Keep the original as <file>.orig.")] = True,
    force: Annotated[bool, typer.Option("--force", help="With --write: write a file that is read-only.")] = False,
    *,
    shared: SharedArgs,
) -> None:
    """Print (or --write) the one skip-list addition that makes every TARGET release load the checkpoint.

    Exit codes: 0 nothing to change (or --write applied it and nothing is left failing); 1 a change
    is pending (--diff, the default), something no config change fixes remains, or the change gives
    a release a new load error; 2 usage error.
    """
    from ckptlint.fix import plan_fix, refuse_write_target
    from ckptlint.reader import NotACheckpoint

    if diff and write:
        usage_error("--diff prints the change and --write applies it: use one of them")
    refusal = refuse_write_target(path) if write else None
    if refusal:
        usage_error(refusal)
    path = common.checkpoint_path(path)
    cfg = common.settings(path, shared)
    releases = common.fix_targets(target, cfg)
    dep = common.deployment(cfg, shared)
    try:
        with common.endpoint_env(shared.endpoint):
            fp = plan_fix(path, releases, dep)
    except NotACheckpoint as exc:
        usage_error(str(exc))
    if fp.diff:
        from ckptlint.render.safe import surrogates_escaped

        # (a lone surrogate can only be in a JSON string of the new text: its escape is the same JSON)
        sys.stdout.write(surrogates_escaped(fp.diff))
        if write:
            _write(path, fp, backup, force)
    elif not fp.not_fixable:
        typer.echo(f"ckptlint: nothing to fix for {_names(releases)}", err=True)
    _explain(fp, releases)
    pending = bool(fp.diff) and not write
    raise typer.Exit(EXIT_FINDINGS if (fp.not_fixable or fp.remaining or fp.regressions or pending) else EXIT_OK)


def _names(releases) -> str:
    from ckptlint.render.grouping import release_ranges

    return release_ranges([t.id for t in releases], releases)


def _write(path: str, fp, backup: bool, force: bool) -> None:
    from ckptlint.fix import FixRefused, write_fix

    try:
        notes = write_fix(path, fp, backup=backup, force=force)
    except FixRefused as exc:
        usage_error(f"cannot write {fp.file} in {path}: {exc}; {fp.file} was not changed")
    except OSError as exc:
        usage_error(f"cannot write {fp.file} in {path}: {exc.strerror or exc}; {fp.file} was not changed")
    for note in notes:
        typer.echo(f"ckptlint: {note}", err=True)
    typer.echo(f"ckptlint: added {len(fp.added)} entr{'y' if len(fp.added) == 1 else 'ies'} to "
               f"{'.'.join(fp.key_path)} in {fp.file}", err=True)


def _explain(fp, releases) -> None:
    from ckptlint.render.grouping import release_ranges
    from ckptlint.targets import resolve

    def said(rows) -> str:
        ids = [t for t, _ in rows]
        by_label: dict[str, list[str]] = {}
        for t, label in rows:
            by_label.setdefault(label, []).append(t)
        ts = [t for t in releases if t.id in ids] or [x for t in ids for x in resolve(t)]
        return "; ".join(f"{label}: {release_ranges(tids, ts)}" for label, tids in by_label.items())

    if fp.after:
        typer.echo(f"ckptlint: re-checked with the change, releases it is for: {said(fp.after)}", err=True)
    if fp.rechecked:
        typer.echo(f"ckptlint: re-checked with the change, other default releases: {said(fp.rechecked)}", err=True)
    for f, why in fp.not_fixable:
        on = f" ({f.target})" if f.target and len(releases) > 1 else ""
        typer.echo(f"not fixable by config{on}: {f.code} {f.module or f.file}: {why}", err=True)
    for f in fp.remaining:
        on = f" ({f.target})" if f.target and len(releases) > 1 else ""
        typer.echo(f"still failing after the change{on}: {f.code} {f.module}: {f.message}", err=True)
    for f in fp.regressions:
        typer.echo(f"warning: the change gives {f.target} a new load error: {f.code} {f.module}", err=True)
